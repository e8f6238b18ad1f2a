"""What the master counts for its metrics: how long things take, as histograms in seconds.

The bounds are fixed so that every scrape of the metrics sees the same buckets;
they span what each thing takes here (docs/limits.md): a switch is applied in
about a millisecond, a step (a scheduling event's decisions, a synced write to
the job store) tens of microseconds to milliseconds, a migration seconds.
"""

import bisect
import time

from gangsched.protocol.messages import Histogram

SWITCH_BOUNDS_S = (0.00025, 0.0005, 0.001, 0.002, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1.0)
STEP_BOUNDS_S = (0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.1)
MIGRATION_BOUNDS_S = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


class Timings:
    def __init__(self, bounds: tuple[float, ...]) -> None:
        self._bounds = bounds
        self._counts = [0] * (len(bounds) + 1)
        self._total_s = 0.0

    @classmethod
    def merged(cls, parts: list["Timings"]) -> "Timings":
        """One histogram of the observations of several (of the same bounds)."""
        merged = cls(parts[0]._bounds)
        for part in parts:
            merged._counts = [mine + theirs for mine, theirs in zip(merged._counts, part._counts, strict=True)]
            merged._total_s += part._total_s
        return merged

    def observe(self, seconds: float) -> None:
        self._counts[bisect.bisect_left(self._bounds, seconds)] += 1
        self._total_s += seconds

    @property
    def count(self) -> int:
        return sum(self._counts)

    def mean(self) -> float:
        return self._total_s / max(1, self.count)

    def histogram(self) -> Histogram:
        return Histogram(bounds=list(self._bounds), counts=list(self._counts), total_s=self._total_s)


class Stopwatch:
    """Times a block into ``timings``: ``with Stopwatch(timings): ...``."""

    def __init__(self, timings: Timings) -> None:
        self._timings = timings
        self._started = 0

    def __enter__(self) -> None:
        self._started = time.perf_counter_ns()

    def __exit__(self, *_: object) -> None:
        self._timings.observe((time.perf_counter_ns() - self._started) / 1e9)
