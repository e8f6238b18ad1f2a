"""The live master, fed the events of a simulated run, makes the simulator's decisions.

The simulator runs a random workload under a policy; the master core (no
sockets, a fake clock) then hears the same events at the same instants: each
job's submission, and the exit of its tasks when the simulation ended it. Every
job must start when the simulation started it, on as many nodes.
"""

import random
from pathlib import Path

import pytest

from gangsched.master.node_events import NodeEndpoints
from gangsched.master.settings import MasterSettings
from gangsched.master.sqlite_store import SqliteStore
from gangsched.policy.catalog import Choice
from gangsched.protocol.messages import LaunchTask, Submit, TaskExit
from gangsched.protocol.records import JobSpec
from gangsched.sim.runner import run_keeping_jobs
from gangsched.sim.sim_job import SimJob
from tests.helpers.driven_master import FakeClock, driven_master
from tests.helpers.master_events import hello

NODES = 8


def workload(seed: int, count: int = 60) -> list[SimJob]:
    """Poisson arrivals, widths 1-8, run times with a long tail, estimates above them: no ties."""
    rng = random.Random(seed)
    jobs, now = [], 0.0
    for job_id in range(1, count + 1):
        now += rng.expovariate(1 / 30)
        run_time = rng.expovariate(1 / 120) + 1
        jobs.append(SimJob(job_id, now, run_time, run_time * rng.uniform(1, 3), rng.choice([1, 1, 2, 2, 3, 4, 6, 8])))
    return jobs


def replay_on_master(jobs: list[SimJob], choice: Choice, tmp_path: Path) -> dict[int, tuple[float, int]]:
    """Each job's start and width as the master decided them, with the simulated ends as the tasks' exits."""
    clock = FakeClock()
    clock.now = 0.0
    # time limits off: the fake clock jumps, and the quanta between events are not simulated
    settings = MasterSettings(quantum_ms=100, heartbeat_ms=10**9, heartbeat_misses=1, policy=choice.policy,
                              mpl=choice.mpl, over_time_s=float("inf"), state_dir=tmp_path,
                              longest_estimate_s=max(job.estimate for job in jobs))
    endpoints = NodeEndpoints("ipc:///tmp/s", "ipc:///tmp/r")
    core = driven_master(settings, endpoints, SqliteStore(tmp_path / "jobs.db"), clock)
    for index in range(1, NODES + 1):
        hello(core, f"n{index}")
    events = [(job.submit, 1, job) for job in jobs] + [(job.end, 0, job) for job in jobs]
    # the simulator's own wake-ups: starts that are neither an arrival nor an end
    events += [(job.start, 2, job) for job in jobs]
    started: dict[int, tuple[float, int]] = {}
    master_id: dict[int, int] = {}
    nodes_of: dict[int, list[str]] = {}
    for time, kind, job in sorted(events, key=lambda event: (event[0], event[1], event[2].job_id)):
        clock.now = time
        if kind == 0:
            for rank, node in enumerate(nodes_of[master_id[job.job_id]]):
                core.task_ended(TaskExit(node=node, job_id=master_id[job.job_id], rank=rank, returncode=0))
        elif kind == 1:
            spec = JobSpec(name="j", user="u", tasks=job.procs, argv=["true"], estimate_s=job.estimate)
            master_id[job.job_id] = core.clients.submit(Submit(spec=spec)).job_id
        else:
            core.tick()
        for _, message in core.outbox:
            if isinstance(message, LaunchTask) and message.task.rank == 0:
                nodes_of[message.task.job_id] = []
                started[message.task.job_id] = (clock.now, message.task.size)
        for node, message in core.outbox:
            if isinstance(message, LaunchTask):
                nodes_of[message.task.job_id].append(node)
        core.outbox.clear()
    by_master_id = {master: sim for sim, master in master_id.items()}
    return {by_master_id[job_id]: start for job_id, start in started.items()}


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative", "slack", "gs", "bgs", "gs-largeq"])
def test_the_master_starts_every_job_when_the_simulator_does(policy, tmp_path):
    choice = Choice(policy=policy, mpl=3)
    _, simulated = run_keeping_jobs(choice, workload(seed=7), NODES)
    decided = replay_on_master(simulated, choice, tmp_path)
    assert len(decided) == len(simulated)
    for job in simulated:
        assert decided[job.job_id] == pytest.approx((job.start, job.procs)), f"job {job.job_id}"
