"""Space-sharing policies: FCFS and EASY backfilling (seed 002 §2's baselines, SPEC §6).

Each job gets its processors to itself from start to end (rate 1). Jobs wait
in arrival order. FCFS starts jobs from the head of the queue while they fit.
EASY (Lifka) also starts a later job when it fits now and does not delay the
head: it ends, by its estimate, before the head's reserved start (the
"shadow" time), or it only uses processors the head will not need then.

Invariant (EASY): the head of the queue never starts later than the shadow
time computed when it became the head.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from gangsched.sim.jobs import SimJob


@dataclass
class _SpaceSharing:
    procs: int
    free: int = 0
    queue: list[SimJob] = field(default_factory=list)
    ends: dict[int, tuple[float, int]] = field(default_factory=dict)  # running: estimated end, procs

    def __post_init__(self) -> None:
        self.free = self.procs

    def submit(self, job: SimJob, now: float) -> None:
        self.queue.append(job)

    def finish(self, job: SimJob, now: float) -> None:
        self.free += self.ends.pop(job.job_id)[1]

    def _start(self, job: SimJob, now: float, started: dict[int, float]) -> None:
        self.free -= job.procs
        self.ends[job.job_id] = (now + job.estimate, job.procs)
        started[job.job_id] = 1.0

    def _start_from_head(self, now: float, started: dict[int, float]) -> None:
        while self.queue and self.queue[0].procs <= self.free:
            self._start(self.queue.pop(0), now, started)


class FcfsPolicy(_SpaceSharing):
    name = "fcfs"

    def schedule(self, now: float) -> Mapping[int, float]:
        started: dict[int, float] = {}
        self._start_from_head(now, started)
        return started


class EasyPolicy(_SpaceSharing):
    name = "easy"

    def schedule(self, now: float) -> Mapping[int, float]:
        started: dict[int, float] = {}
        self._start_from_head(now, started)
        if not self.queue:
            return started
        shadow, extra = self._shadow(self.queue[0].procs, now)
        waiting = []
        for job in self.queue[1:]:
            ends_in_time = now + job.estimate <= shadow
            if job.procs <= self.free and (ends_in_time or job.procs <= extra):
                self._start(job, now, started)
                if not ends_in_time:
                    extra -= job.procs
            else:
                waiting.append(job)
        self.queue[1:] = waiting
        return started

    def _shadow(self, needed: int, now: float) -> tuple[float, int]:
        """When the head can start by the running jobs' estimates, and the processors spare then."""
        available = self.free
        for end, procs in sorted(self.ends.values()):
            available += procs
            if available >= needed:
                return max(end, now), available - needed
        return float("inf"), 0  # unreachable: a prepared job always fits the machine
