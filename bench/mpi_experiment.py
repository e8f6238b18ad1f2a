"""L6: real fine-grained MPI jobs under gang scheduling and under local (uncoordinated) scheduling.

Gang scheduling exists for programs whose ranks exchange messages every few
milliseconds and busy-wait for each other (Ousterhout, *Scheduling
techniques for concurrent systems*, ICDCS 1982; Feitelson and Rudolph, *Gang
scheduling performance benefits for fine-grain synchronization*, JPDC 1992).
Here each job is ``jobs/mpi/allreduce.c``: every iteration computes for
``grain`` ms of CPU time, then all ranks allreduce; MPICH busy-polls while it
waits. On a fresh local cluster with one processor per core of the machine,
2 and 3 such jobs as wide as the cluster share it under strict gang
scheduling, paired gang scheduling and local scheduling (every rank runs at
once; the kernel time-shares the cores). Each job's iterations per second are
measured over a window in which all run. The same 2 jobs at 1 ms also run
on one node per core, one processor each, where ranks talk over TCP instead
of shared memory, under strict gang and local scheduling, and under local
scheduling with MPICH's yield turned off (its waits then only poll).

Besides the mixes, L6 measures one job of
10,000 allreduces alone under gang scheduling against the MPI wheel's
``mpiexec`` on the same cores (same result, iterations/s), and the PMI
start-up, from submission until every rank is past ``MPI_Init``, of 4 ranks
and of 16 emulated processors.
"""

import getpass
import os
import re
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from matplotlib.figure import Figure

from gangsched.bench.mix import measure_rates
from gangsched.sim.report import Advance, Experiment, ExperimentOptions, markdown_table, write_csv
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import temporary_cluster
from gangsched.jobs.mpi_programs import build, mpi_tool
from gangsched.master.client import MasterClient
from gangsched.protocol.records import JobSpec, JobState, MpiKind

GRAINS_MS = (1, 5, 20)
MIXES = (2, 3)
MODES = {  # name -> (pairing, coordination)
    "strict": ("strict", "gang"),
    "paired": ("paired", "gang"),
    "local": ("strict", "local"),
}
QUANTUM_MS = 100
ALONE_ITERATIONS = 10_000
STARTUP_SHAPES = ((4, 1), (4, 4))  # (nodes, processors per node): 4 ranks, 16 emulated processors


def mpi_spec(binary: Path, tasks: int, iterations: int, grain_ms: float) -> JobSpec:
    return JobSpec(name=f"allreduce-{grain_ms:g}ms", user=getpass.getuser(), tasks=tasks, mpi=MpiKind.PMI1,
                   argv=[str(binary), "--iterations", str(iterations), "--grain-ms", str(grain_ms)], cwd="/")


def l6(out: Path, options: ExperimentOptions, advance: Advance) -> str:
    cores = len(os.sched_getaffinity(0))
    with tempfile.TemporaryDirectory(prefix="gang-l6-") as folder:
        binary = build("allreduce", Path(folder))
        rows: list[dict[str, Any]] = []
        for mode in MODES:
            for jobs in MIXES:
                for grain in GRAINS_MS:  # one node of a processor per core: ranks share memory
                    rows += _mix(binary, mode, "shm", jobs, grain, options.seconds)
                    advance(f"L6 {mode} {jobs} jobs {grain} ms")
        for mode in ("strict", "local"):  # a node per core: ranks talk over TCP
            rows += _mix(binary, mode, "tcp", 2, 1, options.seconds)
            advance(f"L6 {mode} over TCP")
        rows += _mix(binary, "local", "shm-spin", 2, 1, options.seconds)  # does MPICH's yield help local?
        advance("L6 local without MPICH's yield")
        alone = _alone(binary, cores)
        advance("L6 alone vs mpiexec")
        startups = [_startup(binary, nodes, processors) for nodes, processors in STARTUP_SHAPES]
        advance("L6 start-up")
    write_csv(out / "l6.csv", rows)
    _plot(out / "l6.png", rows)
    return _report(rows, alone, startups, cores)


def _mix(binary: Path, mode: str, layout: str, jobs: int, grain: int, seconds: float) -> list[dict[str, Any]]:
    """Each job's iterations/s when ``jobs`` jobs as wide as the cluster share a fresh one."""
    cores = len(os.sched_getaffinity(0))
    pairing, coordination = MODES[mode]
    nodes, processors = (cores, 1) if layout == "tcp" else (1, cores)
    config = ClusterConfig(nodes=nodes, processors_per_node=processors, quantum_ms=QUANTUM_MS, pairing=pairing,
                           coordination=coordination)
    spec = mpi_spec(binary, cores, 0, grain)
    if layout == "shm-spin":  # MPICH's waits poll without ever yielding the processor
        spec = spec.model_copy(update={"env": {"MPIR_CVAR_POLLS_BEFORE_YIELD": "0"}})
    with temporary_cluster(config) as client:
        rates = measure_rates(client, [spec] * jobs, seconds, warmup_s=2.0)
    return [{"layout": layout, "mode": mode, "grain_ms": grain, "jobs": jobs, "job": index,
             "iterations_per_s": round(rate, 2)} for index, (_, _, _, rate) in enumerate(rates)]


def _total(rows: list[dict[str, Any]], mode: str, jobs: int, grain: int, layout: str = "shm") -> float:
    wanted = {"layout": layout, "mode": mode, "jobs": jobs, "grain_ms": grain}
    return sum(row["iterations_per_s"] for row in rows if all(row[key] == value for key, value in wanted.items()))


def _plot(path: Path, rows: list[dict[str, Any]]) -> None:
    figure = Figure(figsize=(9, 4), layout="constrained")
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
    figure.suptitle("L6: fine-grained MPI jobs, gang vs local scheduling")
    figure.savefig(path, dpi=120)


def _alone(binary: Path, cores: int) -> dict[str, Any]:
    """One job of 10,000 allreduces (1 ms grain) alone under strict gang scheduling, and under mpiexec."""
    argv = ["--iterations", str(ALONE_ITERATIONS), "--grain-ms", "1"]
    config = ClusterConfig(nodes=1, processors_per_node=cores, quantum_ms=QUANTUM_MS)
    with temporary_cluster(config) as client:
        job = client.submit(mpi_spec(binary, cores, ALONE_ITERATIONS, 1))
        info = _ended(client, job, timeout_s=120)
        gang_output = _rank0_output(client, job)
    reference = subprocess.run([mpi_tool("mpiexec"), "-n", str(cores), str(binary), *argv],
                               capture_output=True, text=True, timeout=120).stdout
    return {"state": info.state.value, "gang": _fields(gang_output), "mpiexec": _fields(reference)}


def _startup(binary: Path, nodes: int, processors: int) -> dict[str, Any]:
    """Seconds from submission until every rank is past MPI_Init, median of 5 jobs."""
    tasks = nodes * processors
    config = ClusterConfig(nodes=nodes, processors_per_node=processors, quantum_ms=QUANTUM_MS)
    seconds = []
    with temporary_cluster(config) as client:
        for _ in range(5):
            job = client.submit(mpi_spec(binary, tasks, 1, 0))
            info = _ended(client, job, timeout_s=60)
            initialized = float(_fields(_rank0_output(client, job))["initialized_at"])
            seconds.append(initialized - info.submit_time)
    return {"tasks": tasks, "nodes": nodes, "seconds": statistics.median(seconds)}


def _ended(client: MasterClient, job: int, timeout_s: float) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        (info,) = client.jobs([job])
        if info.state.is_final:
            if info.state is not JobState.COMPLETED:
                raise RuntimeError(f"job {job} ended {info.state}: {info.reason}")
            return info
        time.sleep(0.05)
    raise RuntimeError(f"job {job} did not end within {timeout_s:g} s")


def _rank0_output(client: MasterClient, job: int) -> str:
    home = Path(client.endpoint.removeprefix("ipc://")).parent  # the local cluster's GANG_HOME
    (info,) = client.jobs([job])
    return (home / "nodes" / info.node_names[0] / f"job-{job}.0.out").read_text()


def _fields(text: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", text))


def _report(rows: list[dict[str, Any]], alone: dict[str, Any], startups: list[dict[str, Any]], cores: int) -> str:
    table = []
    for jobs in MIXES:
        for grain in GRAINS_MS:
            strict, paired, local = (_total(rows, mode, jobs, grain) for mode in MODES)
            table.append([jobs, grain, f"{strict:.1f}", f"{paired:.1f}", f"{local:.1f}",
                          f"{strict / local:.2f}" if local else "-", f"{paired / strict:.2f}" if strict else "-"])
    tcp_strict, tcp_local = _total(rows, "strict", 2, 1, "tcp"), _total(rows, "local", 2, 1, "tcp")
    spin = _total(rows, "local", 2, 1, "shm-spin")
    gang, mpiexec = alone["gang"], alone["mpiexec"]
    ratio = float(gang["iterations_per_s"]) / float(mpiexec["iterations_per_s"])
    return (
        f"{cores} processors on one node ({cores} cores), quantum {QUANTUM_MS} ms; total iterations/s of all "
        "jobs of a mix:\n\n"
        + markdown_table(["jobs", "grain (ms)", "strict", "paired", "local", "gang/local", "paired/strict"], table)
        + f"\n\nThe 2 jobs at 1 ms on {cores} nodes of one processor (ranks talk over TCP): strict "
        f"{tcp_strict:.1f}, local {tcp_local:.1f} (gang/local {tcp_strict / tcp_local:.2f}). The same 2 jobs on "
        f"one node, local, with MPICH's yield turned off (MPIR_CVAR_POLLS_BEFORE_YIELD=0): {spin:.1f} "
        f"(gang/local {_total(rows, 'strict', 2, 1) / spin:.2f})."
        + f"\n\nOne job of {ALONE_ITERATIONS:,} allreduces (1 ms grain) alone: {alone['state']} under strict gang "
        f"scheduling with result {gang['result']} at {gang['iterations_per_s']} iterations/s; under mpiexec "
        f"result {mpiexec['result']} at {mpiexec['iterations_per_s']} iterations/s (gang/mpiexec {ratio:.2f}).\n\n"
        + markdown_table(["ranks", "nodes", "start-up (s, median of 5)"],
                         [[each["tasks"], each["nodes"], f"{each['seconds']:.3f}"] for each in startups])
        + "\n"
    )


L6 = Experiment("L6", "fine-grained MPI jobs: gang vs local scheduling",
                len(MODES) * len(MIXES) * len(GRAINS_MS) + 5, l6)
