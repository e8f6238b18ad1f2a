"""A trace on the live cluster, and the simulator's prediction of the same run (`gang replay`).

The trace's jobs become synthetic ``timed`` jobs: each runs for its recorded
run time divided by the speedup, counted in the quanta it is given (not in CPU,
which the emulated nodes of one machine share), with its recorded estimate,
also divided, as its estimate and time limit. Under paired gang scheduling (or
local scheduling) what a job uses of the CPU decides what runs with it, so
there the jobs are fine-grained compute jobs of a utilization drawn for each
(bench/twin.py), and the prediction is simulated quantum by quantum. Widths are scaled from the
trace's machine to the cluster's nodes (at least one). The jobs are submitted
at their scaled arrival times; when all have ended, their starts and ends make
a schedule that the simulator's, for the same jobs and policy, can be set beside.
"""

import dataclasses
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass

from gangsched.client.master_client import MasterClient
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.protocol.records import JobInfo, JobState
from gangsched.sim.prepare import prepare
from gangsched.sim.sim_job import SimJob
from gangsched.workload.swf import SwfJob


@dataclass(frozen=True)
class ReplayedJob:
    job: SimJob  # as submitted, with the live start and end (seconds from the first submission)
    info: JobInfo


def scaled_jobs(records: list[SwfJob], machine_procs: int, nodes: int, speedup: float, count: int,
                skip: int = 0, load: float | None = None, min_run_s: float = 2.0,
                run_ms: float = 100.0) -> list[SimJob]:
    """``count`` jobs of the trace from the ``skip``-th, on ``nodes`` nodes, ``speedup`` times faster.

    Run times are whole iterations of ``run_ms``, as the synthetic jobs run them, and
    ``min_run_s`` at least: starting and ending a job's tasks takes a few tenths of a
    second that the simulator does not count. ``load`` rescales the arrivals to offer
    that load of the cluster's nodes.
    """
    jobs = prepare(records[skip:skip + count], machine_procs).jobs
    if not jobs:
        raise ValueError("no job of the trace is left to replay in that window")
    first, step = jobs[0].submit, run_ms / 1000
    scaled = []
    for index, job in enumerate(jobs, start=1):
        run_time = max(round(max(job.run_time / speedup, min_run_s) / step), 1) * step
        scaled.append(dataclasses.replace(
            job, job_id=index, submit=(job.submit - first) / speedup, run_time=run_time,
            estimate=max(job.estimate / speedup, run_time), procs=max(1, math.ceil(job.procs * nodes / machine_procs)),
        ))
    if load is not None:
        scaled = _at_load(scaled, nodes, load)
    return scaled


def _at_load(jobs: list[SimJob], nodes: int, load: float) -> list[SimJob]:
    """Arrivals rescaled so that the jobs offer ``load`` of the nodes between the first and last arrival."""
    span = jobs[-1].submit - jobs[0].submit
    if span <= 0:
        return jobs
    offered = sum(job.run_time * job.procs for job in jobs) / (nodes * span)
    return [dataclasses.replace(job, submit=job.submit * offered / load) for job in jobs]


def timed_program(job: SimJob, run_ms: float = 100.0) -> SyntheticJob:
    """The job as a ``timed`` program: its progress follows its quanta, whatever the CPU."""
    return SyntheticJob("timed", iterations=round(job.run_time * 1000 / run_ms), run_ms=run_ms)


def with_utilizations(jobs: list[SimJob], low: float, high: float, seed: int = 1) -> list[SimJob]:
    """Each job with a CPU utilization drawn uniformly from [low, high] % (a trace records none that
    paired gang scheduling could use)."""
    rng = random.Random(seed)
    return [dataclasses.replace(job, utilization=rng.uniform(low, high)) for job in jobs]


def replay(client: MasterClient, jobs: list[SimJob], program: Callable[[SimJob], SyntheticJob],
           timeout_s: float = 3600.0, progress: Callable[[int], None] | None = None) -> list[ReplayedJob]:
    """Submit each job at its time, as ``program`` runs it; wait until every one has ended."""
    began = time.time()
    submitted: dict[int, SimJob] = {}
    for job in sorted(jobs, key=lambda job: job.submit):
        time.sleep(max(0.0, began + job.submit - time.time()))
        spec = job_spec(program(job), job.procs, estimate_s=job.estimate)
        submitted[client.submit(spec.model_copy(update={"name": f"replay-{job.job_id}"}))] = job
    deadline = time.monotonic() + timeout_s
    finished: dict[int, JobInfo] = {}
    while len(finished) < len(submitted):
        if time.monotonic() > deadline:
            raise RuntimeError(f"{len(submitted) - len(finished)} replayed jobs did not end in {timeout_s:g} s")
        for info in client.jobs([job_id for job_id in submitted if job_id not in finished]):
            if info.state.is_final:
                finished[info.job_id] = info
                if progress:
                    progress(1)
        time.sleep(0.2)
    return [
        ReplayedJob(dataclasses.replace(job, start=_since(began, info.start_time),
                                        end=_since(began, info.end_time) if info.state is JobState.COMPLETED else None),
                    info)
        for job_id, job in submitted.items()
        for info in [finished[job_id]]
    ]


def _since(began: float, unix_time: float | None) -> float | None:
    return None if unix_time is None else unix_time - began
