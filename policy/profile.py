"""A profile of free processors over future time, the planning board of backfilling.

The profile is a step function kept as two parallel lists: ``free[i]``
processors are free from ``times[i]`` until ``times[i + 1]``; the last step
lasts forever. Reservations subtract from it, releases add back, and steps
that become equal to their neighbour are merged so the lists stay as short as
the number of distinct planned events.

Queries walk the steps once (O(steps)); a reservation touches only the steps it
covers. Reservations take absolute ends, so that releasing exactly what was
reserved never leaves a sliver behind through float rounding. Zero-length
reservations change nothing: a job of no duration only needs its processors at
one instant.
"""

from bisect import bisect_left, bisect_right
from dataclasses import dataclass, field

INFINITY = float("inf")


@dataclass
class Profile:
    procs: int
    times: list[float] = field(default_factory=lambda: [0.0])
    free: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.free:
            self.free = [self.procs]

    def copy(self) -> "Profile":
        return Profile(self.procs, self.times[:], self.free[:])

    def advance(self, now: float) -> None:
        """Forget the steps wholly in the past."""
        index = bisect_right(self.times, now) - 1
        if index > 0:
            del self.times[:index]
            del self.free[:index]
        self.times[0] = max(self.times[0], now)

    def earliest(self, procs: int, duration: float, after: float, limit: float = INFINITY) -> float:
        """The first instant from ``after`` with ``procs`` free for ``duration``; ``limit`` if none before it."""
        return self.earlier_start(procs, duration, after, limit, clip=False)

    def earlier_start(self, procs: int, duration: float, after: float, held: float, clip: bool = True) -> float:
        """Where a job holding a reservation from ``held`` could start instead, without releasing it first.

        From its own start on, its own processors are free to it, so only the
        part of the window before ``held`` needs looking at. ``held`` if nowhere earlier.
        Without ``clip`` (``earliest``), ``held`` is only a limit, and the whole window must be free:
        one function for both, as compressing a queue calls this one for every job at every early end.
        """
        times, free = self.times, self.free
        index = bisect_right(times, after) - 1 if after > times[0] else 0  # mostly from now: the first step
        stop = bisect_left(times, held, index)  # the steps from ``stop`` on begin at ``held`` or later
        if not clip and held < INFINITY and max(free[index:stop], default=procs) < procs:
            return held  # nowhere before the limit has room: decided at C speed (pays off for BGS's rows)
        if after >= held:
            return held
        last = len(times) - 1
        start = after
        while True:
            # the loops are tight for the same reason
            while free[index] < procs:  # no room: the next step that has some may start the job
                index += 1
                if index >= stop:
                    return held
                start = times[index]
            end = start + duration
            if clip and end > held:
                end = held
            index += 1
            while index <= last and times[index] < end:  # room all through to ``end``?
                if free[index] < procs:
                    break
                index += 1
            else:
                return start

    def fits(self, procs: int, start: float, end: float) -> bool:
        """Whether ``procs`` are free all through [start, end)."""
        times, free = self.times, self.free
        index = max(bisect_right(times, start) - 1, 0)
        while index < len(times) and times[index] < end:
            if free[index] < procs:
                return False
            index += 1
        return True

    def reserve(self, procs: int, start: float, end: float) -> None:
        self._add(-procs, start, end)

    def release(self, procs: int, start: float, end: float) -> None:
        self._add(procs, start, end)

    def _add(self, delta: int, start: float, end: float) -> None:
        if end <= start:
            return
        first = self._split(start)
        last = self._split(end)
        free = self.free
        for index in range(first, last):
            free[index] += delta
        # merge equal neighbours at both edges; the inside was uniform before and stays so
        for index in (last, first):
            if 0 < index < len(free) and free[index] == free[index - 1]:
                del self.times[index]
                del free[index]

    def _split(self, instant: float) -> int:
        """The index of the step that begins at ``instant``, making one if needed."""
        times = self.times
        index = bisect_right(times, instant) - 1
        if index >= 0 and times[index] == instant:
            return index
        times.insert(index + 1, instant)
        self.free.insert(index + 1, self.free[max(index, 0)])
        return index + 1
