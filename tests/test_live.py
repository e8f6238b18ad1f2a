"""Real daemons, real processes, real signals on this machine."""

import getpass
import os
import re
import signal
import statistics
import subprocess
import sys
import time

import psutil
import pytest
import zmq

from gangsched.client.master_client import MasterUnreachable, RequestRefused
from gangsched.deploy.local import task_processes
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.protocol.codec import decode, encode
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import ErrorReply, NodeQuery, NodeWelcome, SlotSwitch
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import is_held, wait_until

pytestmark = pytest.mark.live
USER = getpass.getuser()


def spec(kind: str, nodes: int, iterations: int = 0, compute_ms: float = 10.0) -> JobSpec:
    return job_spec(SyntheticJob(kind, iterations, compute_ms), nodes)


def test_two_jobs_alternate_every_quantum_and_report_their_utilization(start_cluster):
    cluster = start_cluster(nodes=4, quantum_ms=200)
    compute = cluster.client.submit(spec("compute", 4, compute_ms=50))
    io = cluster.client.submit(spec("io", 4))
    cluster.client.wait_until_running([compute, io], timeout_s=20)
    tasks = {job: task_processes(cluster.home, job) for job in (compute, io)}
    assert all(len(found) == 4 for found in tasks.values())

    # The rows the master runs, quantum by quantum, and which job's tasks are seen running alone: a
    # property of the schedule, not a rate (how often a busy host lets this loop look is no test's
    # business: gang bench switch and gang bench mix give the figures).
    rows_of_quantum: dict[int, tuple[int, ...]] = {}
    seen_alone: set[int] = set()
    # each job's utilization, by the quantum the master was at, once past its start-up (imports are CPU)
    utilization: dict[int, dict[int, float]] = {compute: {}, io: {}}

    def look() -> bool:
        matrix = cluster.client.matrix()
        rows_of_quantum[matrix.quantum] = tuple(matrix.running)
        held = {job: [is_held(p) for p in procs] for job, procs in tasks.items()}
        for job, other in ((compute, io), (io, compute)):
            if not any(held[job]) and all(held[other]):
                seen_alone.add(job)
        for info in cluster.client.jobs([compute, io]):
            if info.util_pct is not None and info.barriers >= 3:
                utilization[info.job_id][matrix.quantum] = info.util_pct
        consecutive = [q for q in rows_of_quantum if q + 1 in rows_of_quantum]
        return seen_alone == {compute, io} and len(consecutive) >= 3 and all(len(u) >= 8 for u in utilization.values())

    wait_until(look, 60, "each job to run alone, three pairs of consecutive quanta, eight quanta of each measured")
    # strict gang scheduling of two rows: one row a quantum, the other the next
    assert all(len(rows) == 1 for rows in rows_of_quantum.values())
    assert all(rows_of_quantum[q] != rows_of_quantum[q + 1] for q in rows_of_quantum if q + 1 in rows_of_quantum)
    # side by side on the same nodes: the compute job uses more of what it is given than the I/O job
    assert statistics.median(utilization[compute].values()) > statistics.median(utilization[io].values())


def test_paired_scheduling_keeps_a_compute_and_an_io_job_runnable_together(start_cluster):
    cluster = start_cluster(nodes=4, quantum_ms=200, pairing="paired")
    compute = cluster.client.submit(spec("compute", 4))
    io = cluster.client.submit(spec("io", 4))
    cluster.client.wait_until_running([compute, io], timeout_s=20)
    # 1.6-3 s here idle; once over 10 s in a full run, right after the docker tests
    wait_until(lambda: len(cluster.client.matrix().running) == 2, 20, "the two rows to pair")
    tasks = task_processes(cluster.home, compute) + task_processes(cluster.home, io)
    wait_until(lambda: all(not is_held(p) for p in tasks), 10, "every task of both jobs to run at once")
    predicted = {j.job_id: j.predicted_pct for j in cluster.client.jobs([compute, io])}
    assert predicted[io] < predicted[compute]  # measured side by side: what made them partners


def test_a_job_runs_to_completion_and_counts_its_barriers(start_cluster):
    cluster = start_cluster(nodes=2)
    job = cluster.client.submit(spec("compute", 2, iterations=30))
    info = wait_until(lambda: (j := cluster.client.job(job)).state.is_final and j, 30, "the job to end")
    assert info.state is JobState.COMPLETED and info.exit_code == 0
    assert info.barriers == 30 and info.cpu_s >= 2 * 30 * 0.010 * 0.9


def test_a_command_missing_on_the_node_fails_the_job_with_the_reason(start_cluster):
    cluster = start_cluster(nodes=2)
    job = cluster.client.submit(JobSpec(name="x", user=USER, tasks=2, argv=["no-such-program"]))
    info = wait_until(lambda: (j := cluster.client.job(job)).state.is_final and j, 10, "the job to end")
    assert info.state is JobState.FAILED and "command not found" in info.reason


def test_cancel_ends_every_task_even_stopped_ones(start_cluster):
    cluster = start_cluster(nodes=2)
    first = cluster.client.submit(spec("spin", 2))
    second = cluster.client.submit(spec("spin", 2))
    cluster.client.wait_until_running([first, second], timeout_s=20)
    cluster.client.cancel(first, USER)
    cluster.client.cancel(second, USER)
    wait_until(lambda: not task_processes(cluster.home), 10, "every task to end")
    wait_until(lambda: all(j.state.is_final for j in cluster.client.jobs([first, second])), 10,
               "the master to hear of every exit")
    assert [j.state for j in cluster.client.jobs([first, second])] == [JobState.CANCELLED] * 2


def test_cancel_ends_a_job_that_ignores_sigterm_and_one_whose_node_is_frozen(start_cluster):
    """Cancel always ends a job: past a task that ignores SIGTERM (killed after the grace), and on a
    node daemon that does not answer (the job ends when the node is down; the node, back, kills it)."""
    cluster = start_cluster(nodes=2, heartbeat_ms=200)
    stubborn = cluster.client.submit(JobSpec(name="stubborn", user=USER, tasks=1,
                                             argv=["sh", "-c", "trap '' TERM; while :; do sleep 0.1; done"]))
    frozen = cluster.client.submit(spec("spin", 1))
    cluster.client.wait_until_running([stubborn, frozen], timeout_s=20)
    frozen_node = cluster.client.job(frozen).node_names[0]
    daemon = psutil.Process(cluster.local.state().pids[frozen_node])
    daemon.suspend()
    try:
        for job in (stubborn, frozen):
            assert cluster.client.cancel(job, USER).state is JobState.CANCELLED
        wait_until(lambda: all(j.state is JobState.CANCELLED for j in cluster.client.jobs([stubborn, frozen])),
                   15, "both jobs to end as CANCELLED")
    finally:
        daemon.resume()
    wait_until(lambda: not task_processes(cluster.home), 15, "every task to end once the node is back")


def test_a_killed_node_daemon_is_marked_down_and_leaves_no_task(start_cluster):
    cluster = start_cluster(nodes=4, heartbeat_ms=200)
    job = cluster.client.submit(spec("compute", 4))
    cluster.client.wait_until_running([job], timeout_s=20)
    node2_tasks = [p for p in task_processes(cluster.home, job) if p.environ()["GANG_NODE"] == "node2"]
    assert len(node2_tasks) == 1

    os.kill(cluster.local.state().pids["node2"], signal.SIGKILL)
    wait_until(lambda: any(n.name == "node2" and n.state == "down" for n in cluster.client.nodes()),
               10.0, "node2 to be marked down")
    wait_until(lambda: not task_processes(cluster.home), 10, "every task of the job to end")
    # the job ends when the master has heard every other rank's exit, a moment after they die
    info = wait_until(lambda: (found := cluster.client.job(job)).state.is_final and found, 10, "the job to end")
    # lost for its silence (three heartbeats: 0.6 s here), not for anything else
    assert info.state is JobState.NODE_FAIL and info.reason == "node node2 missed 3 heartbeats"
    assert [n.state for n in cluster.client.nodes()] == ["up", "down", "up", "up"]


def test_a_restarted_master_keeps_its_jobs_and_the_nodes_rejoin(start_cluster):
    cluster = start_cluster(nodes=2, mpl=1)
    running = cluster.client.submit(spec("compute", 2))
    queued = cluster.client.submit(spec("compute", 2))
    cluster.client.wait_until_running([running], timeout_s=20)
    pids = {p.pid for p in task_processes(cluster.home, running)}

    cluster.local.restart("master", crash=True)
    wait_until(lambda: _nodes_up(cluster) == 2, 10, "the nodes to register again")
    states = {j.job_id: j.state for j in cluster.client.jobs([running, queued])}
    assert states == {running: JobState.RUNNING, queued: JobState.PENDING}
    assert {p.pid for p in task_processes(cluster.home, running)} == pids  # reattached, not rerun
    before = cluster.client.job(running).barriers
    wait_until(lambda: cluster.client.job(running).barriers > before + 5, 10, "barriers to go on")


def _nodes_up(cluster) -> int:
    try:
        return sum(n.state == "up" for n in cluster.client.nodes())
    except MasterUnreachable:
        return 0


def test_malformed_bytes_get_an_error_reply_and_the_master_lives_on(start_cluster):
    cluster = start_cluster(nodes=1)
    socket = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(cluster.client.endpoint)
    reports = zmq.Context.instance().socket(zmq.PUSH)  # no one to reply to there: a log line
    reports.setsockopt(zmq.LINGER, 0)
    reports.connect(f"ipc://{cluster.home}/report.sock")
    try:
        reports.send(encode(NodeQuery()))
        master_log = cluster.local.log_path("master")
        wait_until(lambda: "ignored a node_query message" in master_log.read_text(), 5, "a log line")

        def counted_in_one_line() -> bool:  # a flood of bad frames: one line a second, with a count
            reports.send(b"\xc1garbage")
            time.sleep(0.02)
            return bool(re.search(r"bad message on the report socket.*and \d+ more like it", master_log.read_text()))
        wait_until(counted_in_one_line, 5, "a line that counts the bad frames since the last")
        for frame, code in [(b"\xc1garbage", ErrorCode.BAD_MESSAGE),
                            (b"\x81\xa1v\x63", ErrorCode.VERSION_MISMATCH),  # {"v": 99}
                            (encode(ErrorReply(code=ErrorCode.INTERNAL, reason="?")), ErrorCode.UNEXPECTED)]:
            socket.send(frame)
            assert socket.poll(3000)
            reply = decode(socket.recv())
            assert isinstance(reply, ErrorReply) and reply.code is code
        socket.send_multipart([b"two", b"frames"])
        assert socket.poll(3000) and decode(socket.recv()).code is ErrorCode.BAD_MESSAGE
        socket.send(encode(NodeQuery()))
        assert socket.poll(3000) and decode(socket.recv()).type == "node_list"
    finally:
        socket.close()
        reports.close()


def test_malformed_bytes_to_a_node_daemon_are_logged_and_it_lives_on(tmp_path):
    """A real node daemon facing a hand-driven master socket that sends it garbage."""
    context = zmq.Context.instance()
    router, pub, pull = context.socket(zmq.ROUTER), context.socket(zmq.PUB), context.socket(zmq.PULL)
    router.bind(f"ipc://{tmp_path}/m.sock")
    pub.bind(f"ipc://{tmp_path}/s.sock")
    pull.bind(f"ipc://{tmp_path}/r.sock")
    node = subprocess.Popen(
        [sys.executable, "-m", "gangsched.cli", "noded", "--master", f"ipc://{tmp_path}/m.sock",
         "--name", "lone", "--spool-dir", str(tmp_path / "spool"), "--peer-transport", "ipc",
         "--log-file", str(tmp_path / "node.log")],
        stderr=subprocess.PIPE, text=True,
    )
    log = tmp_path / "node.log"
    try:
        assert router.poll(10000)
        identity, frame = router.recv_multipart()
        assert decode(frame).type == "node_hello"
        router.send_multipart([identity, b"\xc1not msgpack"])
        router.send_multipart([identity, encode(NodeWelcome(
            node="lone", switch_endpoint=f"ipc://{tmp_path}/s.sock", report_endpoint=f"ipc://{tmp_path}/r.sock",
            heartbeat_ms=100, quantum_ms=100))])

        def switch_reported(quantum: int) -> bool:
            pub.send(encode(SlotSwitch(quantum=quantum, sent_ns=time.monotonic_ns(), rows={})))
            while pull.poll(100):
                message = decode(pull.recv())
                if message.type == "quantum_report" and message.accounts[-1].quantum == quantum:
                    return True
            return False

        wait_until(lambda: switch_reported(1), 10, "the node to subscribe to switches")
        pub.send(b"\x92garbage")  # read before the next switch: the socket keeps only its newest (CONFLATE)
        wait_until(lambda: "bad switch message" in log.read_text(), 10, "the node to read the garbage")
        assert switch_reported(2), "the node stopped applying switches after garbage"
        assert node.poll() is None
    finally:
        node.terminate()
        node.communicate(timeout=10)
        router.close()
        pub.close()
        pull.close()
    assert "bad message from the master" in log.read_text()


def test_the_cli_gives_one_line_errors(start_cluster, monkeypatch):
    cluster = start_cluster(nodes=2)
    monkeypatch.setenv("GANG_MASTER", cluster.client.endpoint)

    def gang(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "gangsched.cli", *args], capture_output=True, text=True)

    assert (
        "needs 3 processors, the cluster has 2 processors on 2 nodes"
        in gang("submit", "-n", "3", "--synthetic", "io").stderr
    )
    assert "command not found: nope" in gang("submit", "-n", "1", "--", "nope").stderr
    assert "no job 42" in gang("cancel", "42").stderr
    unreachable = gang("queue", "--master", "ipc:///tmp/gang-nobody.sock")
    assert unreachable.returncode == 1 and "no answer from the master" in unreachable.stderr
    with pytest.raises(RequestRefused):
        cluster.client.cancel(42, USER)


def test_submissions_through_a_master_kill_make_every_job_once_and_fail_none(start_cluster):
    from gangsched.bench.restarts import run_restart

    cluster = start_cluster(nodes=2)
    result = run_restart(cluster.local, submissions=60, clients=4)
    assert (result.accepted, result.completed, result.wrongly_failed, result.lost, result.duplicates) == \
        (60, 60, 0, 0, 0), result
