"""Changing a workload's load: by its arrival rate or by its run times (docs/metrics.md, 'Workloads')."""

from gangsched.workload.swf import SwfJob


def offered_load(jobs: list[SwfJob], procs: int) -> float:
    """Processor-seconds asked for over processor-seconds available between first and last arrival."""
    span = jobs[-1].submit - jobs[0].submit
    work = sum(max(job.run_time, 0) * max(job.procs, 0) for job in jobs)
    return work / (procs * span) if span > 0 else float("inf")


def scale_arrivals(jobs: list[SwfJob], factor: float) -> list[SwfJob]:
    """Inter-arrival times divided by ``factor``: the load rises by that factor."""
    first = jobs[0].submit if jobs else 0.0
    return [job._replace(submit=round(first + (job.submit - first) / factor, 2))
            for job in jobs]


def scale_run_times(jobs: list[SwfJob], factor: float) -> list[SwfJob]:
    """Run times and estimates multiplied by ``factor``, as Zhang et al. 2000 raise their load (1.0-1.8)."""
    return [
        job._replace(run_time=job.run_time * factor,
                     req_time=job.req_time * factor if job.req_time > 0 else job.req_time)
        for job in jobs
    ]


def at_load(jobs: list[SwfJob], procs: int, load: float) -> list[SwfJob]:
    """The workload with its arrivals rescaled to offer ``load``."""
    return scale_arrivals(jobs, load / offered_load(jobs, procs))
