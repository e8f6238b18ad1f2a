"""The switch path's guarantees on real daemons: a switch names only rows, each node holds its
column of the matrix, and a node converges whatever it missed (docs/architecture.md, 'One
quantum'). The master's side, column by column, is in tests/test_master_core.py."""

import getpass
import subprocess
import sys
import time

import psutil
import pytest

from gangsched.deploy.local import task_processes
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import is_held, wait_until

pytestmark = pytest.mark.live
USER = getpass.getuser()


def runs_every_quantum(processes: list[psutil.Process], looks: int) -> bool:
    """None of ``processes`` is seen stopped in ``looks`` looks 20 ms apart (a window of several quanta)."""
    for _ in range(looks):
        if any(is_held(process) for process in processes):
            return False
        time.sleep(0.02)  # sampling a window, not waiting for a condition
    return True


def test_a_node_that_missed_switches_and_its_new_column_converges(start_cluster):
    """A frozen node daemon misses switches and the column a cancel changed; thawed, it runs
    what the newest switch and column say: the job left alone runs in every quantum, though it
    moved from row 1 to row 0, which in node1's old column holds the cancelled job."""
    cluster = start_cluster(nodes=2, quantum_ms=100, heartbeat_ms=500)  # lost after 1.5 s of silence
    client = cluster.client
    cancelled, alone = (client.submit(JobSpec(name=name, user=USER, tasks=2, argv=["sleep", "600"]))
                        for name in ("cancelled", "alone"))
    client.wait_until_running([alone, cancelled], timeout_s=20)
    wait_until(lambda: client.matrix().rows == [[cancelled, cancelled], [alone, alone]], 10, "two rows")
    daemon = psutil.Process(cluster.local.state().pids["node1"])
    daemon.suspend()
    try:
        client.cancel(cancelled, USER)
        wait_until(lambda: client.matrix().rows == [[alone, alone]], 5, "the matrix to hold one row")
        missed = client.matrix().quantum + 3  # these switches and node1's new column wait in its sockets
        wait_until(lambda: client.matrix().quantum >= missed, 5, "three switches node1 misses")
    finally:
        daemon.resume()
    wait_until(lambda: client.job(cancelled).state is JobState.CANCELLED, 10, "the cancelled job to end")
    wait_until(lambda: not task_processes(cluster.home, cancelled), 10, "the cancelled job's tasks to end")
    on_node1 = [p for p in task_processes(cluster.home, alone) if p.environ()["GANG_NODE"] == "node1"]
    wait_until(lambda: runs_every_quantum(on_node1, 15), 5, "node1 to run the job left alone in every quantum")
    assert [node.state for node in client.nodes()] == ["up", "up"]
    # thawed, it found the column and the switches waiting together: the column went first, and nothing failed
    assert "Traceback" not in (cluster.home / "logs" / "node1.log").read_text()


def test_a_node_that_joins_late_gets_its_column_and_runs_its_rank(start_cluster, tmp_path):
    cluster = start_cluster(nodes=2, quantum_ms=100)
    client = cluster.client
    late = subprocess.Popen(
        [sys.executable, "-m", "gangsched.cli", "noded", "--master", client.endpoint, "--name", "node3",
         "--spool-dir", str(tmp_path / "node3"), "--peer-transport", "ipc", "--log-file", str(tmp_path / "node3.log")])
    try:
        wait_until(lambda: [node.name for node in client.nodes()] == ["node1", "node2", "node3"], 15, "node3")
        # a barrier every 5 ms on three nodes: it completes only if node3 runs its rank with the others
        job = client.submit(job_spec(SyntheticJob("compute", 200, 5.0), 3))
        info = wait_until(lambda: (found := client.job(job)).state.is_final and found, 60, "the job to end")
        assert info.state is JobState.COMPLETED, info.reason
        assert "node3" in info.node_names
    finally:
        late.terminate()
        late.wait(timeout=15)


def test_nodes_that_report_every_few_quanta_leave_no_quantum_unaccounted(start_cluster, monkeypatch):
    """With one report a quantum for the whole cluster, each of 3 nodes sends its accounts every
    3 quanta: the master still has every switch from every node, and each job's utilization."""
    monkeypatch.setenv("GANG_MASTER_REPORTS_PER_QUANTUM", "1")
    cluster = start_cluster(nodes=3, quantum_ms=100)
    client = cluster.client
    compute, io = (client.submit(job_spec(SyntheticJob(kind, 0, 10.0), 3)) for kind in ("compute", "io"))
    client.wait_until_running([compute, io], timeout_s=20)
    # 40 quanta from here, not from the master's start: on a slow host the nodes' own start takes a second
    # or more, and the switches sent before every node had registered are not every node's to report
    running_from = client.matrix().quantum
    wait_until(lambda: client.matrix().quantum >= running_from + 40, 10, "40 quanta")
    latencies = client.switch_stats(30).latencies_ns
    assert len(latencies) == 30  # each reported by all three nodes, some up to 3 quanta late
    assert all(latency > 0 for latency in latencies)  # its figure is gang bench switch's, not a test's
    utilization = {job.job_id: job.util_pct for job in client.jobs([compute, io])}
    assert utilization[compute] > utilization[io], utilization  # side by side, on the same nodes
