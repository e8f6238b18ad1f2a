"""Memory on a live cluster: requests as Slurm spells them, nodes that declare memory, placement that
never overcommits it, limits that end a job OUT_OF_MEMORY, and each job's peak (docs/memory.md).

Nodes here declare small memories (512M): a test never presses on the machine's own. The limit is
tested under both ways a node holds tasks: a cgroup (the kernel enforces it) and the process tree
(the node reads the tasks' memory at every heartbeat).
"""

import getpass
import subprocess
import sys

import pytest

from gangsched.deploy.local import task_processes
from gangsched.protocol.records import JobSpec, JobState
from gangsched.protocol.sizes import parse_size
from tests.helpers.clusters import wait_until

pytestmark = pytest.mark.live

MIB = 1 << 20
# resident, not just reserved: b"x" * n writes every page
ALLOCATES = "import sys, time; held = b'x' * (int(sys.argv[1]) << 20); time.sleep(float(sys.argv[2]))"


def job(name: str, tasks: int, mib: int, seconds: float, nodes: int | None = None, **memory: int) -> JobSpec:
    return JobSpec(name=name, user=getpass.getuser(), tasks=tasks, nodes=nodes,
                   argv=[sys.executable, "-c", ALLOCATES, str(mib), str(seconds)], **memory)


@pytest.mark.parametrize("text, why", [
    ("12Q", "is not a size"), ("-5", "is not a size"), ("0", "must be above 0"), ("0K", "must be above 0"),
    ("9000000T", "2^63 bytes or more"), ("1.5G", "is not a size"),
])
def test_a_malformed_size_is_refused_with_one_line(text, why):
    refused = subprocess.run([sys.executable, "-m", "gangsched.cli", "submit", "--master", "ipc:///nonexistent",
                              f"--mem={text}", "--", "true"], capture_output=True, text=True)
    assert refused.returncode == 2 and why in refused.stderr, refused.stderr
    assert len([line for line in refused.stderr.splitlines() if line.startswith("Error")]) == 1


def test_sizes_are_slurms():
    assert parse_size("300") == parse_size("300M") == 300 * MIB
    assert parse_size("2G") == 2048 * MIB and parse_size("64k") == 64 << 10 and parse_size("1T") == 1 << 40


def test_five_jobs_that_each_need_most_of_every_node_run_one_at_a_time(start_cluster):
    cluster = start_cluster(nodes=4, memory_per_node=512 * MIB, mpl=5)
    nodes = cluster.client.nodes()
    assert [node.memory for node in nodes] == [512 * MIB] * 4
    ids = [cluster.client.submit(job(f"big{index}", 4, 20, 0.6, nodes=4, mem_per_node=300 * MIB))
           for index in range(5)]
    seen_running = 0

    def all_done() -> bool:
        nonlocal seen_running
        infos = cluster.client.jobs(ids, include_finished=True)
        running = [info for info in infos if info.state is JobState.RUNNING]
        seen_running = max(seen_running, len(running))
        committed = {node.name: node.memory_committed for node in cluster.client.nodes()}
        assert all(value <= 512 * MIB for value in committed.values()), committed
        waiting = [info for info in infos if info.state is JobState.PENDING and info.reason]
        assert all(info.reason in ("Resources: memory", "Priority") for info in waiting), waiting
        return all(info.state.is_final for info in infos)

    wait_until(all_done, 60, "the five jobs to end")
    ended = cluster.client.jobs(ids, include_finished=True)
    assert all(info.state is JobState.COMPLETED for info in ended), [(i.state, i.reason) for i in ended]
    assert seen_running == 1
    spans = sorted((info.start_time, info.end_time) for info in ended)
    assert all(end <= start for (_, end), (start, _) in zip(spans, spans[1:])), spans
    assert all(info.max_rss is not None and info.max_rss >= 20 * MIB for info in ended)


def test_a_request_no_node_can_hold_is_refused_at_submit(start_cluster):
    cluster = start_cluster(nodes=2, memory_per_node=512 * MIB)
    refused = subprocess.run([sys.executable, "-m", "gangsched.cli", "submit", "--master", cluster.client.endpoint,
                              "--mem", "600M", "--", "true"], capture_output=True, text=True)
    assert refused.returncode == 1
    assert "600M of memory on each node, the cluster's largest node has 512M of memory" in refused.stderr
    assert not cluster.client.jobs()


@pytest.fixture(params=["cgroup", "process-tree"])
def containment(request, monkeypatch) -> str:
    monkeypatch.setenv("GANG_NODE_CONTAINMENT", request.param)  # the local cluster's node daemons read it
    return request.param


def test_a_task_past_its_limit_ends_its_job_out_of_memory_and_nothing_else(start_cluster, containment):
    cluster = start_cluster(nodes=2, memory_per_node=512 * MIB, mpl=2)
    honest = cluster.client.submit(job("honest", 2, 10, 4.0, mem_per_cpu=64 * MIB))
    # rank 1 of two allocates 200M against a limit of 64M; rank 0 holds 10M and would sleep on
    greedy = JobSpec(name="greedy", user=getpass.getuser(), tasks=2, mem_per_cpu=64 * MIB, argv=[
        sys.executable, "-c", "import os, sys, time\n"
        "held = b'x' * ((200 if os.environ['GANG_RANK'] == '1' else 10) << 20)\ntime.sleep(60)"])
    greedy_id = cluster.client.submit(greedy)
    # a running job's peak comes with its tasks' samples, read every heartbeat (Slurm's sstat MaxRSS)
    wait_until(lambda: (info := cluster.client.job(honest)).state is JobState.RUNNING
               and (info.max_rss or 0) >= 10 * MIB, 10, "the running job's MaxRSS")
    ended = wait_until(lambda: (info := cluster.client.job(greedy_id)).state.is_final and info, 30,
                       "the greedy job to end")
    assert ended.state is JobState.OUT_OF_MEMORY, (ended.state, ended.reason)
    assert "rank 1 on node" in ended.reason and "passed its memory limit of 64M" in ended.reason
    wait_until(lambda: not task_processes(cluster.home, greedy_id), 10, "every task of the greedy job to go")
    done = wait_until(lambda: (info := cluster.client.job(honest)).state.is_final and info, 30,
                      "the other job to end")
    assert done.state is JobState.COMPLETED, done.reason
    assert all(node.state == "up" for node in cluster.client.nodes())


def test_sizes_handed_to_daemons_keep_their_unit():
    # text without a unit is MiB (Slurm's rule): a size in bytes handed on as bare text would be a
    # million times too large, and the master refuses the node
    from gangsched.deploy.config import ClusterConfig

    config = ClusterConfig(nodes=2, node_memory_reserve=256 * MIB, default_mem_per_cpu=64 * MIB)
    assert "--memory-reserve" in config.arguments("node") and "256M" in config.arguments("node")
    assert config.environment("master")["GANG_MASTER_DEFAULT_MEM_PER_CPU"] == "64M"
    assert parse_size("123B") == 123


def test_a_node_that_declares_more_memory_than_its_host_has_is_refused(start_cluster, tmp_path):
    cluster = start_cluster(nodes=1, memory_per_node=512 * MIB)
    boastful = subprocess.Popen(
        [sys.executable, "-m", "gangsched.cli", "noded", "--master", cluster.client.endpoint, "--name", "boastful",
         "--memory", "100T", "--spool-dir", str(tmp_path / "boastful"), "--peer-transport", "ipc",
         "--log-file", str(tmp_path / "boastful.log")])
    try:
        log = cluster.home / "logs" / "master.log"
        wait_until(lambda: "refused node boastful declares 100T of memory, its host has" in log.read_text(), 15,
                   "the master to refuse the node")
        assert [node.name for node in cluster.client.nodes()] == ["node1"]
        # the daemon logs the refusal once the answer reaches it, after the master logged it
        wait_until(lambda: "node_refused" in (tmp_path / "boastful.log").read_text(), 15, "the daemon to be told")
        # nothing lost: the cluster's own node still runs jobs
        done = cluster.client.submit(job("after", 1, 1, 0.1))
        wait_until(lambda: cluster.client.job(done).state is JobState.COMPLETED, 20, "a job on node1")
    finally:
        boastful.terminate()
        boastful.wait(timeout=15)
