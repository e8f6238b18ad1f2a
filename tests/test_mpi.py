"""Real MPI programs (MPICH's C library and mpi4py) as gang jobs on the local cluster, through PMI-1."""

import getpass
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from gangsched.deploy.local import task_processes
from gangsched.jobs.mpi_programs import build, mpi_tool
from gangsched.noded.process_managers.shared_memory import SHM
from gangsched.protocol.admin_messages import JobAction
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.cluster_commands import cpu_ns
from tests.helpers.clusters import ended, is_held, task_output, wait_until
from tests.helpers.mpi_jobs import mpi_job

pytestmark = [pytest.mark.live, pytest.mark.mpi]

ITERATIONS = 2000


@pytest.fixture(scope="module")
def allreduce(tmp_path_factory) -> Path:
    return build("allreduce", tmp_path_factory.mktemp("mpi"))


def python(code: str) -> list[str]:
    return [sys.executable, "-c", code]


def shared_memory() -> set[str]:
    return {path.name for path in SHM.iterdir()}


def test_a_c_program_gives_the_result_it_gives_under_mpiexec(start_cluster, allreduce):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    job = cluster.client.submit(mpi_job([str(allreduce), "--iterations", str(ITERATIONS), "--grain-ms", "0"], 4))
    info = ended(cluster, job)
    assert info.state is JobState.COMPLETED, info.reason
    assert info.node_names == ["node1", "node1", "node2", "node2"] and info.processors == [0, 1, 0, 1]
    ours = re.search(r"result=(\d+)", task_output(cluster, job, "node1", 0))
    reference = subprocess.run([mpi_tool("mpiexec"), "-n", "4", str(allreduce), "--iterations", str(ITERATIONS),
                                "--grain-ms", "0"], capture_output=True, text=True, timeout=60)
    theirs = re.search(r"result=(\d+)", reference.stdout)
    assert ours and theirs and ours.group(1) == theirs.group(1) == str(ITERATIONS * (1 + 2 + 3 + 4))
    assert info.barriers == ITERATIONS  # rank 0's progress file


def test_mpi4py_ranks_on_four_nodes_talk_over_tcp(start_cluster):
    cluster = start_cluster(nodes=4)
    code = ("from mpi4py import MPI; import os; c = MPI.COMM_WORLD; "
            "total = c.allreduce(c.Get_rank() + 1); "
            "print(c.Get_rank(), c.Get_size(), total, os.environ['LOCAL_RANK'], os.environ['MASTER_PORT'])")
    job = cluster.client.submit(mpi_job(python(code), 4, nodes=4))
    info = ended(cluster, job)
    assert info.state is JobState.COMPLETED, info.reason
    assert info.node_names == ["node1", "node2", "node3", "node4"]
    rank, size, total, local_rank, port = task_output(cluster, job, "node3", 2).split()
    assert (rank, size, total, local_rank) == ("2", "4", "10", "0") and int(port) > 0


@pytest.mark.parametrize(("code", "reason"), [
    ("import os; from mpi4py import MPI; c = MPI.COMM_WORLD\n"
     "if c.Get_rank() == 1: os._exit(3)\nc.Barrier()", r"rank 1 on node2 exited with status 3"),
    ("from mpi4py import MPI; c = MPI.COMM_WORLD\nif c.Get_rank() == 2: c.Abort(5)\nc.Barrier()",
     r"rank 2 on node3 called PMI abort with exit code 5"),
    ("import os, signal; from mpi4py import MPI; c = MPI.COMM_WORLD\n"
     "if c.Get_rank() == 3: os.kill(os.getpid(), signal.SIGKILL)\nc.Barrier()",
     r"rank 3 on node4 exited with signal 9"),
], ids=["exit", "abort", "killed"])
def test_a_failing_rank_fails_the_job_naming_it_and_nothing_is_left(start_cluster, code, reason):
    cluster = start_cluster(nodes=4)
    before = shared_memory()
    job = cluster.client.submit(mpi_job(python(code), 4, nodes=4))
    info = ended(cluster, job)
    assert info.state is JobState.FAILED and re.search(reason, info.reason), info.reason
    wait_until(lambda: not task_processes(cluster.home, job), 10, "every rank gone")
    wait_until(lambda: shared_memory() <= before, 10, "the ranks' shared memory removed")


def test_a_cancelled_job_leaves_no_shared_memory(start_cluster):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    before = shared_memory()
    job = cluster.client.submit(mpi_job(python("import time; from mpi4py import MPI; MPI.COMM_WORLD.Barrier(); "
                                               "print('in', flush=True); time.sleep(60)"), 4))
    wait_until(lambda: "in" in task_output(cluster, job, "node2", 3), 30, "the ranks past MPI_Init")
    assert shared_memory() > before  # MPICH's segments, one per node
    cluster.client.cancel(job, getpass.getuser())
    ended(cluster, job)
    wait_until(lambda: shared_memory() <= before, 10, "the ranks' shared memory removed")


def test_a_node_daemon_killed_mid_job_leaves_no_shared_memory_once_it_is_back(start_cluster):
    """Its watchdog kills the ranks, knowing no names; the daemon started again removes what the
    notes in its spool name before it runs a task."""
    cluster = start_cluster(nodes=2, processors_per_node=2)
    before = shared_memory()
    job = cluster.client.submit(mpi_job(python("import time; from mpi4py import MPI; MPI.COMM_WORLD.Barrier(); "
                                               "print('in', flush=True); time.sleep(60)"), 4))
    wait_until(lambda: "in" in task_output(cluster, job, "node2", 3), 30, "the ranks past MPI_Init")
    assert shared_memory() > before
    cluster.local.restart("node2", crash=True)
    ended(cluster, job)
    wait_until(lambda: not task_processes(cluster.home, job), 15, "every rank gone")
    wait_until(lambda: shared_memory() <= before, 15, "the ranks' shared memory removed on both nodes")


def test_a_malformed_pmi_line_fails_the_job_not_the_node(start_cluster):
    cluster = start_cluster(nodes=2)
    garbage = python("import os, time; fd = int(os.environ['PMI_FD']); os.write(fd, b'\\x00garbage\\n'); "
                     "time.sleep(30)")
    job = cluster.client.submit(mpi_job(garbage, 2, nodes=2))
    info = ended(cluster, job)
    assert info.state is JobState.FAILED and "malformed PMI line" in info.reason, info.reason
    healthy = cluster.client.submit(mpi_job(python("from mpi4py import MPI; MPI.COMM_WORLD.Barrier()"), 2))
    assert ended(cluster, healthy).state is JobState.COMPLETED
    assert all(cluster.local.alive().values())


def test_a_barrier_of_a_stopped_gang_waits_for_its_turn(start_cluster, allreduce):
    """Two MPI jobs as wide as the cluster alternate; both complete with the right result."""
    cluster = start_cluster(nodes=2, quantum_ms=100)
    argv = [str(allreduce), "--iterations", "300", "--grain-ms", "1"]
    jobs = [cluster.client.submit(mpi_job(argv, 2)) for _ in range(2)]
    for job in jobs:
        info = ended(cluster, job, 60)
        assert info.state is JobState.COMPLETED, info.reason
        assert f"result={300 * 3}" in task_output(cluster, job, "node1", 0)


def test_local_coordination_runs_every_placed_task_at_once(start_cluster):
    cluster = start_cluster(nodes=2, coordination="local")
    jobs = [cluster.client.submit(mpi_job(python("import time; time.sleep(30)"), 2)) for _ in range(2)]
    wait_until(lambda: all(info.state is JobState.RUNNING for info in cluster.client.jobs(jobs)), 10, "both running")
    # a switch before the second job was placed ran the one row there was: wait for one after
    view = wait_until(lambda: len((view := cluster.client.matrix()).rows) == 2 and view.running == [0, 1] and view,
                      10, "a switch running both rows")
    assert len(view.rows) == 2 and view.running == [0, 1]  # every row, every quantum
    wait_until(lambda: sum(len(task_processes(cluster.home, job)) for job in jobs) == 4, 10, "four tasks")
    for _ in range(20):  # over two quanta: never stopped, the nodes' kernels share the CPUs
        assert all(p.status() != "stopped" for job in jobs for p in task_processes(cluster.home, job))


def test_an_mpi_job_suspended_mid_run_by_a_higher_tier_gives_the_same_result(start_cluster, allreduce, tmp_path):
    path = tmp_path / "gangsched.toml"
    path.write_text('[[nodes]]\nnames = "node[1-2]"\n[[partitions]]\nname = "batch"\npreempt_mode = "suspend"\n'
                    '[[partitions]]\nname = "debug"\npriority_tier = 2\n')
    cluster = start_cluster(config_file=path)
    client = cluster.client
    job = client.submit(mpi_job([str(allreduce), "--iterations", "3000", "--grain-ms", "1"], 2))
    wait_until(lambda: client.job(job).barriers > 100, 60, "the MPI job to pass its first barriers")
    debug = client.submit(JobSpec(name="quick", user=getpass.getuser(), tasks=2, argv=["sleep", "2"],
                                  partition="debug"))
    wait_until(lambda: client.job(job).state is JobState.SUSPENDED, 20, "the MPI job to be suspended")
    wait_until(lambda: all(is_held(process) for process in task_processes(cluster.home, job)), 20,
               "every rank to be held")
    assert ended(cluster, debug, 30).state is JobState.COMPLETED
    info = ended(cluster, job, 120)
    assert info.state is JobState.COMPLETED, info.reason
    assert f"result={3000 * 3}" in task_output(cluster, job, "node1", 0)
    assert [p.by_job for p in info.preemptions] == [debug] and info.preemptions[0].end is not None


@pytest.mark.skipif(os.geteuid() != 0, reason="gang admin suspend is root's")
def test_an_mpi_job_suspended_mid_run_by_an_administrator_gives_the_same_result(start_cluster, allreduce):
    cluster = start_cluster(nodes=2)
    client = cluster.client
    job = client.submit(mpi_job([str(allreduce), "--iterations", "3000", "--grain-ms", "1"], 2))
    wait_until(lambda: client.job(job).barriers > 100, 60, "the MPI job to pass its first barriers")
    client.control_jobs(JobAction.SUSPEND, [job])
    wait_until(lambda: all(is_held(process) for process in task_processes(cluster.home, job)), 20,
               "every rank to be held")
    frozen_at, ran_s, quantum = cpu_ns(cluster, job), client.job(job).ran_s, client.matrix().quantum
    wait_until(lambda: client.matrix().quantum >= quantum + 10, 20, "ten quanta")
    assert cpu_ns(cluster, job) - frozen_at < 20_000_000 and client.job(job).ran_s == ran_s  # frozen, limit stopped
    client.control_jobs(JobAction.RESUME, [job])
    info = ended(cluster, job, 120)
    assert info.state is JobState.COMPLETED, info.reason
    assert f"result={3000 * 3}" in task_output(cluster, job, "node1", 0)
    assert [p.by_user for p in info.preemptions] == ["root"] and info.preemptions[0].end is not None
