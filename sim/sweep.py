"""Many simulations of one workload, in worker processes: load sweeps and the experiments.

The workload's records go to each worker once (the pool's initializer); a task
is a ``Scenario``: a policy choice and what to do to the workload first. Load
is raised by dividing inter-arrival times (``arrivals``) or by multiplying run
times and estimates (``run-times``, as Zhang et al. 2000 do with factors 1.0 to 1.8,
where the "load" is that factor).
"""

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Literal

from gangsched.policy.catalog import Choice
from gangsched.sim.prepare import prepare
from gangsched.sim.runner import Outcome, prioritize, run_keeping_jobs
from gangsched.sim.sim_job import SimJob
from gangsched.workload.estimates import beta_estimates
from gangsched.workload.scaling import at_load, scale_run_times
from gangsched.workload.swf import SwfJob

Scaling = Literal["arrivals", "run-times"]


@dataclass(frozen=True)
class Scenario:
    choice: Choice
    load: float = 1.0  # the offered load asked for, or the run-time factor
    scaling: Scaling | None = None  # None: the workload as it is
    beta: float | None = None  # β-model estimates instead of the workload's
    seed: int = 1
    priority_every: int | None = None  # every N-th job favoured (Talby & Feitelson 1999, §3.3)
    priority: float = 1.0  # the favoured jobs' user and political priority
    keep_jobs: bool = False  # send the scheduled jobs back, not only the summary
    audit_memory: bool = False  # check every event for a node committed beyond its memory

    @property
    def label(self) -> str:
        return self.choice.label()


@dataclass(frozen=True)
class Point:
    scenario: Scenario
    outcome: Outcome
    jobs: list[SimJob] | None = None

    @property
    def label(self) -> str:
        return self.scenario.label

    @property
    def load(self) -> float:
        return self.scenario.load


_workloads: Sequence[list[SwfJob]] = []
_procs = 0


def _start_worker(workloads: Sequence[list[SwfJob]], procs: int) -> None:
    global _workloads, _procs
    _workloads, _procs = workloads, procs


def simulate_scenario(scenario: Scenario, records: list[SwfJob], procs: int) -> Point:
    if scenario.scaling == "arrivals":
        records = at_load(records, procs, scenario.load)
    elif scenario.scaling == "run-times":
        records = scale_run_times(records, scenario.load)
    if scenario.beta is not None:
        records = beta_estimates(records, scenario.beta, scenario.seed)
    jobs = prepare(records, procs, scenario.choice.memory_per_node).jobs
    if scenario.priority_every:
        jobs = prioritize(jobs, scenario.priority_every, scenario.priority)
    outcome, scheduled = run_keeping_jobs(scenario.choice, jobs, procs, audit_memory=scenario.audit_memory)
    return Point(scenario, outcome, scheduled if scenario.keep_jobs else None)


def _in_worker(workload: int, scenario: Scenario) -> Point:
    return simulate_scenario(scenario, _workloads[workload], _procs)


def run_scenarios(records: list[SwfJob], procs: int, scenarios: Sequence[Scenario], workers: int | None = None,
                  done: Callable[[Point], None] | None = None) -> list[Point]:
    """Every scenario, in parallel; the points come back in the order asked for."""
    return run_over_workloads([records], procs, scenarios, workers, done)[0]


def run_over_workloads(workloads: Sequence[list[SwfJob]], procs: int, scenarios: Sequence[Scenario],
                       workers: int | None = None, done: Callable[[Point], None] | None = None) -> list[list[Point]]:
    """Every scenario on every workload (model seeds, a trace's months), in one pool so that no worker
    idles between workloads: the points of each workload, in the order of ``scenarios``."""
    tasks = [(workload, index) for index in range(len(scenarios)) for workload in range(len(workloads))]
    points: dict[tuple[int, int], Point] = {}
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count(), initializer=_start_worker,
                             initargs=(workloads, procs)) as pool:
        # the last scenarios first: sweeps and experiments list loads rising, the longest runs last
        futures = {pool.submit(_in_worker, workload, scenarios[index]): (workload, index)
                   for workload, index in reversed(tasks)}
        for future in as_completed(futures):
            point = points[futures[future]] = future.result()
            if done:
                done(point)
    return [[points[(workload, index)] for index in range(len(scenarios))] for workload in range(len(workloads))]


def sweep(records: list[SwfJob], procs: int, choices: Sequence[Choice], loads: Sequence[float],
          scaling: Scaling = "arrivals", workers: int | None = None,
          done: Callable[[Point], None] | None = None) -> list[Point]:
    """Every choice at every load."""
    scenarios = [Scenario(choice, load, scaling) for choice in choices for load in loads]
    return run_scenarios(records, procs, scenarios, workers, done)


def point_rows(points: Sequence[Point]) -> list[dict[str, object]]:
    rows: list[dict[str, object]] = []
    for point in points:
        summary = point.outcome.summary
        rows.append({
            "policy": point.label, "load": point.load, "utilization": round(summary.utilization, 4),
            "wait_s": round(summary.wait.mean, 1), "wait_sd": round(summary.wait.sd, 1),
            "bounded_slowdown": round(summary.bounded_slowdown.mean, 2),
            "bounded_slowdown_sd": round(summary.bounded_slowdown.sd, 2),
            "loss_of_capacity": round(summary.loss_of_capacity, 4),
            "average_slots": _rounded(point.outcome.average_slots),
            "migrations": point.outcome.migrations, "jobs": summary.jobs,
        })
    return rows


def _rounded(value: float | None) -> float | None:
    return None if value is None else round(value, 3)
