"""L4 (Wiseman & Feitelson 2003, §4.2, Figs. 10–12): a dynamic Lublin workload on the live cluster.

Jobs of the Lublin–Feitelson model arrive over time, scaled down to run here:
run times rescaled to a median of ``MEDIAN_RUN_S`` (kept within
[``MIN_RUN_S``, ``MAX_RUN_S``]), arrival times stretched so the offered load
(node-seconds asked over node-seconds available) is the one wanted. Each job
is a fine-grained synthetic program (bench/twin.py ``compute_program``): 20 ms
iterations in which it computes for a fraction u of the time and waits for the rest. Homogeneous
jobs all have u = 45 % (so they always pair, as in the paper); heterogeneous
jobs draw u uniformly from 5–95 %. Slowdown is response time over the job's
run time in the scaled workload (what it would take alone). Each case is also
simulated quantum by quantum, as its twin (bench/twin.py).
"""

import getpass
import random
import statistics
import time
from dataclasses import dataclass

from gangsched.bench.twin import ProgramCost, compute_program, measure_program, simulate_twin
from gangsched.client.master_client import MasterClient
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import temporary_cluster
from gangsched.protocol.records import JobSpec, JobState
from gangsched.sim.sim_job import SimJob
from gangsched.workload.lublin import lublin_jobs

MEDIAN_RUN_S = 1.5
MIN_RUN_S, MAX_RUN_S = 0.5, 10.0


@dataclass(frozen=True)
class DynamicJob:
    arrival_s: float
    nodes: int
    run_s: float  # alone, at the node's CPU share
    utilization: float  # fraction of each iteration spent computing

    def as_sim_job(self, job_id: int) -> SimJob:
        return SimJob(job_id, self.arrival_s, self.run_s, estimate=10 * MAX_RUN_S, procs=self.nodes,
                      utilization=100 * self.utilization)


@dataclass(frozen=True)
class DynamicResult:
    response_s: float
    slowdown: float
    finished: bool


def dynamic_workload(count: int, nodes: int, load: float, heterogeneous: bool, seed: int) -> list[DynamicJob]:
    model = lublin_jobs(count, nodes, seed)
    median = statistics.median(job.run_time for job in model if job.run_time > 0)
    runs = [min(MAX_RUN_S, max(MIN_RUN_S, job.run_time * MEDIAN_RUN_S / median)) for job in model]
    work = sum(run * job.procs for run, job in zip(runs, model))
    span = work / (nodes * load)
    last = model[-1].submit or 1.0
    rng = random.Random(seed)
    return [
        DynamicJob(
            arrival_s=job.submit * span / last,
            nodes=job.procs,
            run_s=run,
            utilization=rng.uniform(0.05, 0.95) if heterogeneous else 0.45,
        )
        for job, run in zip(model, runs)
    ]


def run_dynamic(client: MasterClient, jobs: list[DynamicJob], cpu_share: float,
                timeout_s: float) -> list[DynamicResult]:
    """Submit each job at its arrival time; wait for all to end (cancel what outlives the timeout)."""
    start = time.monotonic()
    job_ids = []
    for job in jobs:
        time.sleep(max(0.0, start + job.arrival_s - time.monotonic()))
        spec = JobSpec(name="l4", user=getpass.getuser(), tasks=job.nodes,
                       argv=compute_program(job.run_s, 100 * job.utilization, cpu_share).argv())
        job_ids.append(client.submit(spec))
    deadline = start + timeout_s
    while time.monotonic() < deadline and not all(j.state.is_final for j in client.jobs(job_ids)):
        time.sleep(0.5)
    for info in client.jobs(job_ids):
        if not info.state.is_final:
            client.cancel(info.job_id, getpass.getuser())
    results = []
    for job, info in zip(jobs, client.jobs(job_ids)):
        response = (info.end_time or time.time()) - info.submit_time
        results.append(DynamicResult(response, response / job.run_s, info.state is JobState.COMPLETED))
    return results


def l4_cluster(policy: str) -> ClusterConfig:
    return ClusterConfig(nodes=4, quantum_ms=200, pairing=policy)


def measure_l4_program() -> ProgramCost:
    """What the L4 jobs' program takes here beyond its computing and waiting (bench/twin.py)."""
    config = l4_cluster("strict")
    with temporary_cluster(config) as client:
        return measure_program(client, config)


def run_l4_case(policy: str, load: float, heterogeneous: bool, count: int, timeout_s: float, cost: ProgramCost,
                seed: int = 1) -> tuple[list[DynamicResult], list[DynamicResult]]:
    """The case live, and as its twin simulates it with the program's ``cost``."""
    config = l4_cluster(policy)
    jobs = dynamic_workload(count, config.nodes, load, heterogeneous, seed)
    with temporary_cluster(config) as client:
        share = min(node.cpu_share for node in client.nodes())
        live = run_dynamic(client, jobs, share, timeout_s)
    simulated = simulate_twin(config, [job.as_sim_job(index) for index, job in enumerate(jobs, 1)], cost)
    return live, [DynamicResult(response, response / job.run_s, True)
                  for job, twin in zip(jobs, simulated) for response in [(twin.end or 0.0) - twin.submit]]
