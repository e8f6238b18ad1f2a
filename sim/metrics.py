"""The metrics of docs/metrics.md over a finished schedule."""

import math
import operator
import statistics
from dataclasses import dataclass
from itertools import compress

from gangsched.sim.engine import RunTotals
from gangsched.sim.sim_job import SimJob
from gangsched.workload.characteristics import LARGE_ABOVE

TAU_S = 10.0  # bounded slowdown's floor (Zhang et al. 2000)


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
    waits = [wait(job) for job in done]
    slowdowns = [bounded_slowdown(job) for job in done]
    small = [job.procs <= LARGE_ABOVE for job in done]
    short = [job.run_time <= median_run for job in done]
    groups = {  # group -> whether each job is in it, in the order of ``done``
        f"small ≤{LARGE_ABOVE}p": small, f"large >{LARGE_ABOVE}p": [not member for member in small],
        "short ≤median": short, "long >median": [not member for member in short],
    }
    by_group = {}
    for name, members in groups.items():
        if any(members):
            by_group[name] = (sum(members), _stat(list(compress(waits, members))),
                              _stat(list(compress(slowdowns, members))))
    return Summary(
        jobs=len(done),
        unfinished=len(jobs) - len(done),
        wait=_stat(waits),
        response=_stat([response(job) for job in done]),
        bounded_slowdown=_stat(slowdowns),
        utilization=sum(job.procs * job.run_time for job in done) / (procs * (last - first)) if last > first else 0.0,
        loss_of_capacity=(procs * totals.waiting_seconds - totals.busy_while_waiting) / (procs * (last - first))
        if totals and last > first else 0.0,
        by_group=by_group,
    )


def pyss_selection(jobs: list[SimJob]) -> list[SimJob]:
    """The finished jobs the pyss simulator's statistics average over, so that its figures and ours compare.

    Its bounded slowdown, max(1, (wait + run) / max(run, 10)), is ours; what differs is which jobs
    count. Going through the jobs by end time, it leaves out: jobs it never ran (no run time),
    1-second serial jobs (estimate 1 s, 1 processor), the first 1 % of the jobs to end (the tiny
    ones included in that count), and every job from the first that ends after the last submission
    on (docs/metrics.md, "Comparing with pyss").
    """
    done = sorted((job for job in jobs if job.end is not None and job.run_time > 0),
                  key=lambda job: (job.end or 0.0, job.job_id))
    last_submission = max(job.submit for job in jobs)
    size = len(done)
    kept = []
    for position, job in enumerate(done, 1):
        if job.estimate == 1 and job.procs == 1:
            size -= 1
            continue
        if size >= 100 and position <= size // 100:
            continue
        if (job.end or 0.0) > last_submission:
            break
        kept.append(job)
    return kept


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
    deviations = [value - mean for value in values]
    return Stat(mean, math.sqrt(math.fsum(map(operator.mul, deviations, deviations)) / len(values)))


# Student's t at 97.5 % by degrees of freedom, for 95 % confidence intervals of a mean over a few seeds
_T_975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
          12: 2.179, 15: 2.131, 20: 2.086, 30: 2.042}


def confidence_interval(values: list[float]) -> tuple[float, float]:
    """The mean and the half-width of its 95 % confidence interval (Student's t; 0 for one value)."""
    mean = math.fsum(values) / len(values)
    if len(values) < 2:
        return mean, 0.0
    freedom = len(values) - 1
    t = _T_975[max(key for key in _T_975 if key <= freedom)] if freedom <= 30 else 1.960
    return mean, t * statistics.stdev(values) / math.sqrt(len(values))
