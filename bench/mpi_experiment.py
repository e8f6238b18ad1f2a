"""L6: real fine-grained MPI jobs under gang scheduling and under local (uncoordinated) scheduling.

Gang scheduling exists for programs whose ranks exchange messages every few
milliseconds and busy-wait for each other (Ousterhout, *Scheduling
techniques for concurrent systems*, ICDCS 1982; Feitelson and Rudolph, *Gang
scheduling performance benefits for fine-grain synchronization*, JPDC 1992).
Here each job is ``jobs/mpi/allreduce.c``, built with the MPI library chosen
(MPICH, Open MPI or Intel MPI: bench/mpi_libraries.py): every iteration
computes for ``grain`` ms of CPU time, then all ranks allreduce; the library
busy-polls while it waits. On a fresh local cluster with one processor per core of the machine,
2 and 3 such jobs as wide as the cluster share it under strict gang
scheduling, paired gang scheduling and local scheduling (every rank runs at
once; the kernel time-shares the cores). Each job's iterations per second are
measured over a window in which all run. The same 2 jobs at 1 ms also run
on one node per core, one processor each, where ranks talk over TCP instead
of shared memory, under strict gang and local scheduling (where the library's
TCP starts), and under local scheduling with settings of the library's own
that show why local does as well as it does with it (``LocalVariant``: how
many hand-offs between ranks an allreduce waits for, and whether a waiting
rank gives its core up).

Besides the mixes, L6 measures one job of 10,000 allreduces alone under gang
scheduling against the library's own launcher on the same cores (same
result, iterations/s), and the start-up, from submission until every rank is
past ``MPI_Init``, of 4 and 16 ranks.
"""

import os
import tempfile
from pathlib import Path
from typing import Any

from gangsched.bench.mix import measure_rates
from gangsched.bench.mpi_libraries import MpiLibrary, measure_alone, measure_startup, mpi_library, startup_shapes
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import temporary_cluster
from gangsched.sim.plots import new_figure
from gangsched.sim.report import Advance, Experiment, ExperimentOptions, markdown_table, write_csv

GRAINS_MS = (1, 5, 20)
MIXES = (2, 3)
MODES = {  # name -> (pairing, coordination)
    "strict": ("strict", "gang"),
    "paired": ("paired", "gang"),
    "local": ("strict", "local"),
}
QUANTUM_MS = 100
ALONE_ITERATIONS = 10_000


def l6(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    cores = len(os.sched_getaffinity(0))
    library = mpi_library(options.mpi_library)
    with tempfile.TemporaryDirectory(prefix="gang-l6-") as folder:
        binary = library.build("allreduce", Path(folder))
        rows: list[dict[str, Any]] = []
        for mode in MODES:
            for jobs in MIXES:
                for grain in GRAINS_MS:  # one node of a processor per core: ranks share memory
                    rows += _mix(library, binary, mode, "shm", jobs, grain, options.seconds)
                    advance(f"L6 {mode} {jobs} jobs {grain} ms")
        for mode in ("strict", "local"):  # a node per core: ranks talk over TCP
            if library.tcp:
                rows += _mix(library, binary, mode, "tcp", 2, 1, options.seconds)
            advance(f"L6 {mode} over TCP")
        for variant in library.local_variants:  # why local does as well as it does with this library
            rows += _mix(library, binary, "local", variant.name, 2, 1, options.seconds, variant.environment)
        advance("L6 local with the library's other settings")
        alone = measure_alone(library, binary, 1, cores, ALONE_ITERATIONS, 1)
        advance("L6 alone vs the library's launcher")
        startups = [measure_startup(library, binary, nodes, processors)
                    for nodes, processors in startup_shapes(library)]
        advance("L6 start-up")
    write_csv(out / "l6.csv", rows)
    _plot(out / "l6.png", rows, library)
    return _report(library, rows, alone, startups, cores)


def _mix(library: MpiLibrary, binary: Path, mode: str, layout: str, jobs: int, grain: int,
         seconds: float, environment: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """Each job's iterations/s when ``jobs`` jobs as wide as the cluster share a fresh one: of one
    processor per core (``layout`` "tcp": a node per core), its jobs given ``environment`` too."""
    cores = len(os.sched_getaffinity(0))
    pairing, coordination = MODES[mode]
    nodes, processors = (cores, 1) if layout == "tcp" else (1, cores)
    config = ClusterConfig(nodes=nodes, processors_per_node=processors, quantum_ms=QUANTUM_MS, pairing=pairing,
                           coordination=coordination, **library.cluster_settings())
    spec = library.spec(binary, cores, 0, grain)
    if environment:
        spec = spec.model_copy(update={"env": {**spec.env, **environment}})
    with temporary_cluster(config) as client:
        rates = measure_rates(client, [spec] * jobs, seconds, warmup_s=2.0)
    return [{"layout": layout, "mode": mode, "grain_ms": grain, "jobs": jobs, "job": index,
             "iterations_per_s": round(rate, 2)} for index, (_, _, _, rate) in enumerate(rates)]


def _total(rows: list[dict[str, Any]], mode: str, jobs: int, grain: int, layout: str = "shm") -> float:
    wanted = {"layout": layout, "mode": mode, "jobs": jobs, "grain_ms": grain}
    return float(
        sum(row["iterations_per_s"] for row in rows if all(row[key] == value for key, value in wanted.items()))
    )


def _plot(path: Path, rows: list[dict[str, Any]], library: MpiLibrary) -> None:
    figure = new_figure(figsize=(9, 4), layout="constrained")
    axes = figure.subplots(1, len(MIXES), sharey=False)
    for axis, jobs in zip(axes, MIXES, strict=True):
        width = 0.25
        for offset, mode in enumerate(MODES):
            values = [_total(rows, mode, jobs, grain) for grain in GRAINS_MS]
            axis.bar([index + (offset - 1) * width for index in range(len(GRAINS_MS))], values, width, label=mode)
        axis.set_xticks(range(len(GRAINS_MS)), [f"{grain} ms" for grain in GRAINS_MS])
        axis.set(xlabel="computation between allreduces", ylabel="total iterations/s", yscale="log",
                 title=f"{jobs} MPI jobs sharing the cluster")
        axis.legend()
    figure.suptitle(f"L6: fine-grained MPI jobs ({library.name}), gang vs local scheduling")
    figure.savefig(path, dpi=120)


def _report(library: MpiLibrary, rows: list[dict[str, Any]], alone: dict[str, Any], startups: list[dict[str, Any]],
            cores: int) -> str:
    table = []
    for jobs in MIXES:
        for grain in GRAINS_MS:
            strict, paired, local = (_total(rows, mode, jobs, grain) for mode in MODES)
            table.append([jobs, grain, f"{strict:.1f}", f"{paired:.1f}", f"{local:.1f}",
                          f"{strict / local:.2f}" if local else "-", f"{paired / strict:.2f}" if strict else "-"])
    tcp_strict, tcp_local = _total(rows, "strict", 2, 1, "tcp"), _total(rows, "local", 2, 1, "tcp")
    strict = _total(rows, "strict", 2, 1)
    variants = "".join(
        f" The same 2 jobs on one node, local, with {variant.what} "
        f"({', '.join(f'{key}={value}' for key, value in variant.environment.items())}): {local:.1f} "
        f"(gang/local {strict / local:.2f})."
        for variant in library.local_variants if (local := _total(rows, "local", 2, 1, variant.name)))
    tcp = (f"The 2 jobs at 1 ms on {cores} nodes of one processor (ranks talk over TCP): strict {tcp_strict:.1f}, "
           f"local {tcp_local:.1f} (gang/local {tcp_strict / tcp_local:.2f})." if library.tcp else
           f"{library.name}'s TCP fabric does not start here: no run across nodes.")
    return (
        f"{library.name} ({library.kind.value}), {cores} processors on one node ({cores} cores), quantum "
        f"{QUANTUM_MS} ms; total iterations/s of all jobs of a mix:\n\n"
        + markdown_table(["jobs", "grain (ms)", "strict", "paired", "local", "gang/local", "paired/strict"], table)
        + f"\n\n{tcp}{variants}"
        + f"\n\nOne job of {ALONE_ITERATIONS:,} allreduces (1 ms grain) alone: {alone['state']} under strict gang "
        f"scheduling with result {alone['gang_result']} at {alone['gang_iterations_per_s']} iterations/s; under "
        f"{library.name}'s own launcher result {alone['launcher_result']} at {alone['launcher_iterations_per_s']} "
        f"iterations/s (gang/launcher {alone['ratio']:.2f}).\n\n"
        + markdown_table(["ranks", "nodes", "start-up (s, median of 5)", "longest (s)"],
                         [[each["tasks"], each["nodes"], f"{each['seconds']:.3f}", f"{each['longest_s']:.3f}"]
                          for each in startups])
        + "\n"
    )


L6 = Experiment("L6", "fine-grained MPI jobs: gang vs local scheduling",
                len(MODES) * len(MIXES) * len(GRAINS_MS) + 5, l6)
