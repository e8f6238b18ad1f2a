"""The metrics of docs/metrics.md over a finished schedule."""

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass

from gangsched.sim.engine import RunTotals
from gangsched.sim.jobs import SimJob

TAU_S = 10.0  # bounded slowdown's floor (Zhang et al. 2000)
SMALL_PROCS = 32


@dataclass(frozen=True)
class Stat:
    mean: float
    sd: float


@dataclass(frozen=True)
class Summary:
    jobs: int
    unfinished: int
    wait: Stat
    response: Stat
    bounded_slowdown: Stat
    utilization: float
    loss_of_capacity: float  # Zhang et al. 2000, eq. 2-3: processor time left idle while jobs waited
    by_group: dict[str, tuple[int, Stat, Stat]]  # group -> (jobs, wait, bounded slowdown)


def summarize(jobs: list[SimJob], procs: int, totals: RunTotals | None = None) -> Summary:
    done = [job for job in jobs if job.start is not None and job.end is not None]
    first = min((job.submit for job in done), default=0.0)
    last = max((job.end or 0.0 for job in done), default=0.0)
    median_run = statistics.median(job.run_time for job in done) if done else 0.0
    groups: dict[str, Callable[[SimJob], bool]] = {
        f"small ≤{SMALL_PROCS}p": lambda job: job.procs <= SMALL_PROCS,
        f"large >{SMALL_PROCS}p": lambda job: job.procs > SMALL_PROCS,
        "short ≤median": lambda job: job.run_time <= median_run,
        "long >median": lambda job: job.run_time > median_run,
    }
    return Summary(
        jobs=len(done),
        unfinished=len(jobs) - len(done),
        wait=_stat([wait(job) for job in done]),
        response=_stat([response(job) for job in done]),
        bounded_slowdown=_stat([bounded_slowdown(job) for job in done]),
        utilization=sum(job.procs * job.run_time for job in done) / (procs * (last - first)) if last > first else 0.0,
        loss_of_capacity=(procs * totals.waiting_seconds - totals.busy_while_waiting) / (procs * (last - first))
        if totals and last > first else 0.0,
        by_group={
            name: (len(members), _stat([wait(j) for j in members]), _stat([bounded_slowdown(j) for j in members]))
            for name, test in groups.items()
            if (members := [job for job in done if test(job)])
        },
    )


def wait(job: SimJob) -> float:
    return (job.start or 0.0) - job.submit


def response(job: SimJob) -> float:
    return (job.end or 0.0) - job.submit


def bounded_slowdown(job: SimJob) -> float:
    return max(response(job), TAU_S) / max(job.run_time, TAU_S)


def _stat(values: list[float]) -> Stat:
    if not values:
        return Stat(0.0, 0.0)
    mean = math.fsum(values) / len(values)
    return Stat(mean, math.sqrt(math.fsum((value - mean) ** 2 for value in values) / len(values)))
