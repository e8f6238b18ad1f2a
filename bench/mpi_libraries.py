"""How the live MPI experiments and benchmarks run each MPI library, and the start-up benchmark.

MPICH is the one of this installation (the ``[mpi]`` extra), speaking PMI-1;
Open MPI and Intel MPI live in environments of their own
(jobs/mpi_environments.py): Open MPI speaks PMIx to the node daemons' embedded
server (their ``--pmix-library`` is its own ``libpmix.so.2``), Intel MPI PMI-1
over its shared-memory fabric only (its TCP fabric does not start on this kind
of machine, even under its own ``mpiexec``: docs/mpi.md).

``gang bench alone`` runs one job alone on a fresh cluster against the
library's own launcher on the same cores. ``gang bench startup`` measures, per library, the time from submission until
every rank is past ``MPI_Init`` (``jobs/mpi/allreduce.c`` prints when the last
rank got there), median of a few jobs, for 4 and 16 ranks.
"""

import getpass
import os
import re
import statistics
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from gangsched.client.master_client import MasterClient
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import temporary_cluster
from gangsched.jobs.mpi_environments import MpiEnvironment, ensure
from gangsched.jobs.mpi_programs import build, mpi_tool
from gangsched.protocol.records import JobInfo, JobSpec, JobState, MpiKind

LIBRARIES = ("mpich", "openmpi", "intelmpi")
STARTUP_JOBS = 5


@dataclass(frozen=True)
class LocalVariant:
    """A setting of the library's own that changes how its ranks fare under local scheduling."""

    name: str  # short, for the CSV's layout column
    what: str  # in words, for the report
    environment: dict[str, str]


@dataclass(frozen=True)
class MpiLibrary:
    name: str
    kind: MpiKind  # what its programs speak under gangsched
    environment: MpiEnvironment | None  # None: this installation's MPICH
    tcp: bool  # whether its ranks on several nodes reach each other here
    local_variants: tuple[LocalVariant, ...] = ()

    def build(self, program: str, folder: Path) -> Path:
        if self.environment is None:
            return build(program, folder)
        return self.environment.build(program, folder)

    def task_environment(self) -> dict[str, str]:
        if self.environment is None:
            return {}
        if self.name == "intelmpi":  # its shared-memory fabric, the one that starts here
            return {**self.environment.variables(), "I_MPI_FABRICS": "shm"}
        return self.environment.variables()

    def cluster_settings(self) -> dict[str, Any]:
        """What the local clusters of its runs are given: Open MPI's own PMIx library for the nodes."""
        if self.environment is not None and self.environment.pmix_library is not None:
            return {"node_pmix_library": str(self.environment.pmix_library)}
        return {}

    def launcher(self, ranks: int) -> tuple[list[str], dict[str, str]]:
        """Its own launcher's command for ``ranks`` ranks on this machine, and the variables it needs."""
        if self.environment is None:
            return [mpi_tool("mpiexec"), "-n", str(ranks)], {}
        command = [str(self.environment.bin / "mpiexec"), "-n", str(ranks)]
        if self.name == "openmpi":  # run as root in CI; more ranks than cores in the start-up runs
            return [*command, "--oversubscribe"], {"OMPI_ALLOW_RUN_AS_ROOT": "1",
                                                  "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}
        return command, self.task_environment()

    def spec(self, binary: Path, tasks: int, iterations: int, grain_ms: float) -> JobSpec:
        return JobSpec(name=f"allreduce-{grain_ms:g}ms", user=getpass.getuser(), tasks=tasks,
                       mpi=self.kind, argv=[str(binary), "--iterations", str(iterations), "--grain-ms",
                                            str(grain_ms)], cwd="/", env=self.task_environment())


def mpi_library(name: str) -> MpiLibrary:
    """``name`` (mpich, openmpi, intelmpi), its environment made where it is not yet."""
    # why local scheduling fares better with one library than another (docs/experiments.md): how many
    # hand-offs between ranks an allreduce waits for, and whether a waiting rank gives its core up
    if name == "mpich":
        return MpiLibrary("mpich", MpiKind.PMI1, None, tcp=True, local_variants=(
            LocalVariant("generic", "its generic collectives instead of its shared-memory ones, whose waits "
                         "give the core up", {"MPIR_CVAR_DEVICE_COLLECTIVES": "none"}),))
    if name == "openmpi":
        return MpiLibrary(
            "openmpi",
            MpiKind.PMIX,
            ensure("openmpi"),
            tcp=True,
            local_variants=(
                LocalVariant(
                    "reduce-bcast",
                    "the allreduce as a reduce and then a broadcast, two hand-offs as in "
                    "MPICH's shared-memory collectives, instead of one exchange",
                    {"OMPI_MCA_coll_tuned_use_dynamic_rules": "1", "OMPI_MCA_coll_tuned_allreduce_algorithm": "1"},
                ),
                LocalVariant("yield", "its waits giving the core up", {"OMPI_MCA_mpi_yield_when_idle": "1"}),
            ),
        )
    if name == "intelmpi":
        return MpiLibrary("intelmpi", MpiKind.PMI1, ensure("intelmpi"), tcp=False)
    raise ValueError(f"no MPI library {name!r}: one of {', '.join(LIBRARIES)}")


def startup_shapes(library: MpiLibrary) -> tuple[tuple[int, int], ...]:
    """(nodes, processors per node) of its 4- and 16-rank start-ups: on 4 nodes where it talks over TCP,
    else on one."""
    return ((4, 1), (4, 4)) if library.tcp else ((1, 4), (1, 16))


def measure_startup(library: MpiLibrary, binary: Path, nodes: int, processors: int,
                    jobs: int = STARTUP_JOBS) -> dict[str, Any]:
    """Seconds from submission until every rank is past MPI_Init, median of ``jobs`` jobs."""
    tasks = nodes * processors
    config = ClusterConfig(nodes=nodes, processors_per_node=processors, quantum_ms=100,
                           **library.cluster_settings())
    seconds = []
    with temporary_cluster(config) as client:
        for _ in range(jobs):
            job = client.submit(library.spec(binary, tasks, 1, 0))
            info = completed(client, job, timeout_s=60)
            initialized = float(fields(rank0_output(client, info))["initialized_at"])
            seconds.append(initialized - info.submit_time)
    return {"library": library.name, "mpi": library.kind.value, "tasks": tasks, "nodes": nodes,
            "seconds": round(statistics.median(seconds), 3), "longest_s": round(max(seconds), 3)}


def measure_alone(library: MpiLibrary, binary: Path, nodes: int, processors: int, iterations: int,
                  grain_ms: float) -> dict[str, Any]:
    """One job as wide as a fresh cluster of ``nodes`` x ``processors``, alone under strict gang
    scheduling, against the library's own launcher with as many ranks on the same cores: the state,
    each one's result and iterations/s, and their ratio."""
    tasks = nodes * processors
    config = ClusterConfig(nodes=nodes, processors_per_node=processors, quantum_ms=100,
                           **library.cluster_settings())
    with temporary_cluster(config) as client:
        job = client.submit(library.spec(binary, tasks, iterations, grain_ms))
        info = completed(client, job, timeout_s=max(120.0, iterations * grain_ms / 1000 * tasks * 3))
        gang = fields(rank0_output(client, info))
    command, variables = library.launcher(tasks)
    launched = subprocess.run([*command, str(binary), "--iterations", str(iterations), "--grain-ms", str(grain_ms)],
                              capture_output=True, text=True, timeout=600,
                              env={**os.environ, **library.task_environment(), **variables})
    launcher = fields(launched.stdout)
    if "iterations_per_s" not in launcher:
        raise RuntimeError(f"{library.name}'s launcher failed: {launched.stderr.strip()[-500:]}")
    return {"library": library.name, "mpi": library.kind.value, "tasks": tasks, "nodes": nodes,
            "state": info.state.value, "gang_result": gang["result"], "launcher_result": launcher["result"],
            "gang_iterations_per_s": float(gang["iterations_per_s"]),
            "launcher_iterations_per_s": float(launcher["iterations_per_s"]),
            "ratio": round(float(gang["iterations_per_s"]) / float(launcher["iterations_per_s"]), 3)}


def completed(client: MasterClient, job: int, timeout_s: float) -> JobInfo:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        (info,) = client.jobs([job])
        if info.state.is_final:
            if info.state is not JobState.COMPLETED:
                raise RuntimeError(f"job {job} ended {info.state}: {info.reason}")
            return info
        time.sleep(0.05)
    raise RuntimeError(f"job {job} did not end within {timeout_s:g} s")


def rank0_output(client: MasterClient, info: JobInfo) -> str:
    home = Path(client.endpoint.removeprefix("ipc://")).parent  # the local cluster's GANG_HOME
    return (home / "nodes" / info.node_names[0] / f"job-{info.job_id}.0.out").read_text()


def fields(text: str) -> dict[str, str]:
    return dict(re.findall(r"(\w+)=(\S+)", text))
