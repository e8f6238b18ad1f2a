"""Writing benchmark, simulation and experiment results, and what an experiment is (live or simulated)."""

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

Advance = Callable[[str], None]  # reports one finished run to the progress bar


@dataclass(frozen=True)
class ExperimentOptions:
    seconds: float = 30.0  # live: measurement window of each run
    jobs: int = 10_000  # simulated: jobs in a model workload
    workers: int | None = None  # simulated: worker processes [the cores]
    trace: Path | None = None  # simulated: the KTH trace, for S6
    seeds: int | None = None  # S3: model workloads averaged over [the experiment's default]
    workload: str = "zhang2000"  # S1-S4: the baseline's model (sim/baseline.py)
    mpi_library: str = "mpich"  # L6: the MPI library its jobs are built with (bench/mpi_libraries.py)


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    runs: int  # for the progress bar, per workload seed
    run: Callable[[Path, ExperimentOptions, Advance], str]  # (out, options, advance) -> markdown
    seeds: int = 1  # model workloads averaged over, unless the user says


def percentile(ordered: list[float], fraction: float) -> float:
    """The value ``fraction`` of the way up ``ordered`` (sorted), as the benchmarks report p99."""
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def markdown_table(header: list[str], rows: list[list[Any]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(str(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines)


def write_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    """One row per dict; the columns are every key, in the order first met; a row without one leaves it empty."""
    columns = list(dict.fromkeys(key for row in rows for key in row))
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns, restval="")
        writer.writeheader()
        writer.writerows(rows)
