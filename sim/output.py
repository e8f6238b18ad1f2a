"""A finished schedule written out: one CSV row per job, or SWF with each job's wait filled in."""

import csv
from pathlib import Path

from gangsched.sim.sim_job import SimJob
from gangsched.workload.swf import SwfJob, modelled_job, write_swf


def write_jobs(path: Path, jobs: list[SimJob]) -> None:
    with open(path, "w", newline="") as file:
        writer = csv.writer(file)
        writer.writerow(["job_id", "submit", "start", "end", "wait", "procs", "run_time", "estimate"])
        for job in jobs:
            writer.writerow([job.job_id, job.submit, job.start, job.end,
                             None if job.start is None else job.start - job.submit,
                             job.procs, job.run_time, job.estimate])


def write_schedule(path: Path, jobs: list[SimJob], procs: int, note: str) -> None:
    write_swf(path, [_scheduled(job) for job in jobs], [f"; MaxProcs: {procs}", f"; Note: {note}"])


def _scheduled(job: SimJob) -> SwfJob:
    """The job as the schedule ran it: its wait filled in, its user the log's."""
    wait = -1.0 if job.start is None else round(job.start - job.submit, 2)
    record = modelled_job(job.job_id, job.submit, job.run_time, job.procs)
    return record._replace(wait=wait, req_time=job.estimate, user=int(job.user) if job.user.isdigit() else -1)

