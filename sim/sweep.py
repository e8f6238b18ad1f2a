"""Load sweeps: many simulations of one workload at several loads, in worker processes.

The workload's records go to each worker once (the pool's initializer); a task
is only a policy choice and a load. Load is raised by dividing inter-arrival
times (``arrivals``) or by multiplying run times and estimates (``run-times``,
as seed 000 does with factors 1.0 to 1.8, where the "load" is that factor).
"""

import os
from collections.abc import Callable, Sequence
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Literal

from gangsched.sim.prepare import prepare
from gangsched.sim.runner import Choice, Outcome, run
from gangsched.workload.scaling import at_load, scale_run_times
from gangsched.workload.swf import SwfJob

Scaling = Literal["arrivals", "run-times"]


@dataclass(frozen=True)
class Point:
    label: str
    load: float  # the offered load asked for, or the run-time factor
    outcome: Outcome


_records: list[SwfJob] = []
_procs = 0


def _start_worker(records: list[SwfJob], procs: int) -> None:
    global _records, _procs
    _records, _procs = records, procs


def _run_point(choice: Choice, load: float, scaling: Scaling) -> Point:
    records = at_load(_records, _procs, load) if scaling == "arrivals" else scale_run_times(_records, load)
    return Point(choice.label(), load, run(choice, prepare(records, _procs).jobs, _procs))


def sweep(records: list[SwfJob], procs: int, choices: Sequence[Choice], loads: Sequence[float],
          scaling: Scaling = "arrivals", workers: int | None = None,
          done: Callable[[Point], None] | None = None) -> list[Point]:
    """Every choice at every load; points come back in the order asked for."""
    tasks = [(choice, load) for choice in choices for load in loads]
    points: dict[tuple[Choice, float], Point] = {}
    with ProcessPoolExecutor(max_workers=workers or os.cpu_count(), initializer=_start_worker,
                             initargs=(records, procs)) as pool:
        futures = {pool.submit(_run_point, choice, load, scaling): (choice, load) for choice, load in tasks}
        for future in as_completed(futures):
            point = future.result()
            points[futures[future]] = point
            if done:
                done(point)
    return [points[task] for task in tasks]


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
