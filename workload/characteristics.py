"""The statistics by which Zhang et al. 2000 (§2.2) describe their baseline workload, of any workload."""

import statistics
from dataclasses import dataclass

from gangsched.workload.scaling import offered_load
from gangsched.workload.swf import SwfJob

LARGE_ABOVE = 32  # nodes: their "large" jobs


@dataclass(frozen=True)
class Characteristics:
    jobs: int
    smallest: int
    largest: int
    large_share: float  # of the jobs, those of more than LARGE_ABOVE nodes
    large_work_share: float  # of the processor-seconds, theirs
    offered_load: float
    median_run_s: float
    mean_run_s: float


def characterize(jobs: list[SwfJob], procs: int) -> Characteristics:
    large = [job for job in jobs if job.procs > LARGE_ABOVE]
    work = sum(job.procs * job.run_time for job in jobs)
    runs = [job.run_time for job in jobs]
    return Characteristics(
        jobs=len(jobs), smallest=min(job.procs for job in jobs), largest=max(job.procs for job in jobs),
        large_share=len(large) / len(jobs), large_work_share=sum(job.procs * job.run_time for job in large) / work,
        offered_load=offered_load(jobs, procs), median_run_s=statistics.median(runs),
        mean_run_s=statistics.fmean(runs),
    )
