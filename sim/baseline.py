"""The setting S1-S4 share (Zhang et al. 2000): 320 nodes, jobs of 1 to 256 nodes, a baseline utilization
of 0.55 raised by multiplying run times by 1.0 ... 1.8 (the nine workloads 0-8).

The papers' own fit of the ASCI Blue-Pacific log is lost with their figures.
The baseline jobs come from ``zhang2000``, a hyper-Erlang model calibrated to
what the paper states of that workload (``workload/zhang2000.py``), or, as
before that calibration, from the Lublin-Feitelson model (``lublin``);
arrivals are scaled to the baseline load either way (docs/experiments.md, S3).
"""

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from gangsched.sim.report import Advance, ExperimentOptions, write_csv
from gangsched.sim.sweep import Point, Scenario, run_over_workloads, run_scenarios
from gangsched.workload.lublin import lublin_jobs
from gangsched.workload.scaling import at_load
from gangsched.workload.swf import SwfJob
from gangsched.workload.zhang2000 import MACHINE_NODES, zhang2000_jobs

NODES = MACHINE_NODES
LARGEST_JOB = 256
BASELINE_LOAD = 0.55
FACTORS = [round(1.0 + 0.1 * workload, 1) for workload in range(9)]  # workloads 0-8
FEW_FACTORS = FACTORS[::2]
MODELS: dict[str, Callable[[int, int], list[SwfJob]]] = {  # name -> (jobs, seed) -> records
    "zhang2000": zhang2000_jobs,
    "lublin": lambda count, seed: lublin_jobs(count, LARGEST_JOB, seed=seed),
}


def baseline(options: ExperimentOptions, seed: int = 1) -> list[SwfJob]:
    return at_load(MODELS[options.workload](options.jobs, seed), NODES, BASELINE_LOAD)


def run(records: list[SwfJob], procs: int, scenarios: Sequence[Scenario], options: ExperimentOptions,
        advance: Advance) -> list[Point]:
    return run_scenarios(records, procs, scenarios, options.workers, done=_reporting(advance))


def over_seeds(options: ExperimentOptions, scenarios: Sequence[Scenario], advance: Advance) -> list[list[Point]]:
    """The scenarios on each of ``options.seeds`` baseline workloads: one list of points per scenario."""
    workloads = [baseline(options, seed) for seed in range(1, (options.seeds or 1) + 1)]
    runs = run_over_workloads(workloads, NODES, scenarios, options.workers, done=_reporting(advance))
    return [list(points) for points in zip(*runs)]


def _reporting(advance: Advance) -> Callable[[Point], None]:
    return lambda point: advance(f"{point.label} at {point.load}")


def write(out: Path, name: str, rows: list[dict[str, Any]]) -> None:
    write_csv(out / f"{name}.csv", rows)
