"""A live run's simulated twin: the simulator set up as a local cluster runs (`gang replay`, L4).

The twin takes the master's own settings (its batch policy, MPL, pairing,
matching, sharp-change threshold, quantum) and the way the local cluster pins its
emulated nodes to this machine's cores. Under strict gang scheduling of timed
jobs (whose progress follows their quanta, not the CPU) the fluid simulator says
all there is to say; paired gang scheduling, local scheduling and jobs that use a
part of the CPU are simulated quantum by quantum (sim/quanta.py), the jobs'
utilization and the cores' sharing included (sim/cpu.py).
"""

import copy
import dataclasses
import getpass
import os
import statistics
import time
from dataclasses import dataclass

from gangsched.client.master_client import MasterClient
from gangsched.deploy.config import ClusterConfig
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.master.settings import MasterSettings
from gangsched.protocol.records import JobSpec, JobState
from gangsched.sim.cpu import Cores, job_rates
from gangsched.sim.quanta import Quanta
from gangsched.sim.runner import run_keeping_jobs
from gangsched.sim.sim_job import SimJob

ITERATION_MS = 20.0  # a compute job's iteration: its computing and its waiting
_MEASURED_ITERATIONS = 50
_REPEATS = 3


def compute_program(run_s: float, utilization_pct: float, cpu_share: float) -> SyntheticJob:
    """A fine-grained job that runs ``run_s`` alone on processors of ``cpu_share`` cores, computing
    ``utilization_pct`` of each iteration and waiting for the rest."""
    compute_wall_ms = utilization_pct / 100 * ITERATION_MS
    iterations = max(1, round(run_s * 1000 / ITERATION_MS))
    return SyntheticJob("compute", iterations=iterations, compute_ms=compute_wall_ms * cpu_share,
                        wait_ms=ITERATION_MS - compute_wall_ms)


@dataclass(frozen=True)
class ProgramCost:
    """What a compute job takes on the cluster beyond its computing and waiting, measured alone."""

    launch_s: float  # from its first quantum to its first iteration: the interpreter's start
    launch_cpu_s: float  # the CPU of it: the rest is the node daemon's spawning and the first barrier
    iteration_s: float  # added to each iteration: its barrier, a sleep's lateness

    def dedicated(self, job: SimJob) -> SimJob:
        """``job`` (a compute program of its run time and utilization) with what it takes alone here: the
        CPU of its launch as a CPU-bound start, the rest of the launch and every iteration's overhead
        counted as waiting."""
        iterations = compute_program(job.run_time, job.utilization, 1.0).iterations
        work = iterations * ITERATION_MS / 1000
        startup = min(self.launch_cpu_s, self.launch_s)
        computing = work + iterations * self.iteration_s + self.launch_s - startup
        return dataclasses.replace(job, run_time=startup + computing, startup_s=startup,
                                   utilization=job.utilization * work / computing)

    def __str__(self) -> str:
        return (f"launch {self.launch_s:.2f} s ({self.launch_cpu_s:.2f} s of CPU), "
                f"{self.iteration_s * 1000:.1f} ms per iteration")


def measure_program(client: MasterClient, config: ClusterConfig, utilization: float = 50.0) -> ProgramCost:
    """Run a compute job of one iteration and one of many, alone, a few times each on ``client``'s idle
    cluster of ``config``; what they took beyond what the CPU model says they would."""
    share = min(node.cpu_share / node.processors for node in client.nodes())
    quantum_s = _master(config).quantum_ms / 1000
    cores = Cores.pinned(config.nodes, config.processors_per_node, os.cpu_count() or 1)
    short: list[_Run] = []
    long: list[_Run] = []
    for _ in range(_REPEATS):
        for iterations, took in ((1, short), (_MEASURED_ITERATIONS, long)):
            program = compute_program(iterations * ITERATION_MS / 1000, utilization, share)
            took.append(_run_alone(client, program))
    short_s = statistics.mean(run.seconds for run in short)
    per_iteration = (statistics.mean(run.seconds for run in long) - short_s) / (_MEASURED_ITERATIONS - 1)
    modelled = ITERATION_MS / 1000 / job_rates({1: (utilization, [0])}, cores)[1]
    # a job placed during a quantum waits for the next boundary: half a quantum on average
    launch = short_s - per_iteration - quantum_s / 2
    iteration_cpu = utilization / 100 * ITERATION_MS / 1000 * share
    launch_cpu = statistics.mean(run.cpu_s for run in short) - iteration_cpu
    return ProgramCost(launch_s=max(0.0, launch), launch_cpu_s=max(0.0, launch_cpu),
                       iteration_s=max(0.0, per_iteration - modelled))


@dataclass(frozen=True)
class _Run:
    seconds: float  # from the job's launch to its end
    cpu_s: float  # of all its tasks


def _run_alone(client: MasterClient, program: SyntheticJob) -> _Run:
    job_id = client.submit(JobSpec(name="twin-measure", user=getpass.getuser(), tasks=1, argv=program.argv()))
    while not (info := client.jobs([job_id])[0]).state.is_final:
        time.sleep(0.05)
    if info.state is not JobState.COMPLETED or info.start_time is None or info.end_time is None:
        raise RuntimeError(f"measuring job {job_id} ended {info.state.value}: {info.reason}")
    return _Run(info.end_time - info.start_time, info.cpu_s)


def by_quanta(config: ClusterConfig) -> bool:
    """Whether the cluster's runs need the quantum-by-quantum simulator."""
    settings = _master(config)
    return settings.pairing_used() == "paired" or settings.coordination == "local"


def simulate_twin(config: ClusterConfig, jobs: list[SimJob], cost: ProgramCost | None = None) -> list[SimJob]:
    """``jobs`` (submit times from the first submission) as the simulator schedules them on ``config``'s
    cluster: quantum by quantum where ``by_quanta``, on the cores the local cluster pins its nodes to,
    each compute program with the ``cost`` it was measured to have. The jobs come back as given, with
    their simulated start and end."""
    settings = _master(config)
    quanta = None
    if by_quanta(config):
        quanta = Quanta(settings.quantum_ms / 1000, settings.pairing_used(), settings.matching,
                        settings.coordination, settings.sharp_change or None,
                        Cores.pinned(config.nodes, config.processors_per_node, os.cpu_count() or 1))
    costed = [copy.copy(job) if cost is None else cost.dedicated(job) for job in jobs]
    scheduled = run_keeping_jobs(settings.choice(), costed, config.nodes * config.processors_per_node,
                                 quanta=quanta)[1]
    return [dataclasses.replace(job, start=twin.start, end=twin.end) for job, twin in zip(jobs, scheduled)]


def _master(config: ClusterConfig) -> MasterSettings:
    return MasterSettings.model_validate(config.settings["master"])
