"""Barriers per second of a job mix (Wiseman & Feitelson 2003, §4.1): i I/O-bound and c compute-bound
jobs, each on every node, all started together and measured over a window in
which all of them run (the paper stops at the first job's end; these jobs run
until cancelled, so the window is simply fixed).
"""

import getpass
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from gangsched.client.master_client import MasterClient
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.protocol.records import JobSpec


@dataclass(frozen=True)
class MixResult:
    job: int
    kind: str
    barriers: int
    seconds: float
    barriers_per_s: float


@contextmanager
def running(client: MasterClient, specs: list[JobSpec], warmup_s: float) -> Iterator[list[int]]:
    """Submit the jobs, wait until all run and ``warmup_s`` more; cancel them afterwards."""
    job_ids = [client.submit(spec) for spec in specs]
    try:
        client.wait_until_running(job_ids, timeout_s=60)
        time.sleep(warmup_s)
        yield job_ids
    finally:
        for job_id in job_ids:
            client.cancel(job_id, getpass.getuser())


def run_mix(
    client: MasterClient, jobs: list[SyntheticJob], nodes: int, seconds: float, warmup_s: float
) -> list[MixResult]:
    rates = measure_rates(client, [job_spec(job, nodes) for job in jobs], seconds, warmup_s)
    return [MixResult(job_id, job.kind, passed, elapsed, rate)
            for (job_id, passed, elapsed, rate), job in zip(rates, jobs, strict=True)]


def measure_rates(
    client: MasterClient, specs: list[JobSpec], seconds: float, warmup_s: float
) -> list[tuple[int, int, float, float]]:
    """Run the jobs together; each one's (id, barriers passed, seconds, barriers/s) over a window
    of ``seconds`` in which all of them run (rank 0's progress counter, as the master read it)."""
    with running(client, specs, warmup_s) as job_ids:
        start = {job.job_id: job for job in client.jobs(job_ids)}
        time.sleep(seconds)
        end = {job.job_id: job for job in client.jobs(job_ids)}
    results = []
    for job_id in job_ids:
        before, after = start[job_id], end[job_id]
        elapsed = (after.barriers_time or 0) - (before.barriers_time or 0)
        passed = after.barriers - before.barriers
        results.append((job_id, passed, elapsed, passed / elapsed if elapsed > 0 else 0.0))
    return results
