"""Masters that share a PostgreSQL store: one leads, the others stand by; a standby takes the lead when
the leader is killed (kill -9) or stopped (SIGSTOP), or when root moves it, and every running gang
runs on; a leader continued after a SIGSTOP finds itself fenced and stands by (docs/architecture.md,
"Leadership"). Nodes and clients are given both masters; the fencing epoch is checked where it is
kept, in the node's core."""

import functools
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import psutil
import pytest

from gangsched.client.master_client import MasterClient, RequestRefused
from gangsched.noded.masters import Masters
from gangsched.protocol.leadership_messages import MasterRole, Takeover, TakeoverRequested
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import ended, task_output, wait_until
from tests.helpers.mpi_jobs import mpi_job
from tests.helpers.slurm_commands import command, install_slurm_commands, submitted
from tests.helpers.web import get


def test_a_node_obeys_only_the_newest_leader_epoch_it_has_seen_and_counts_the_rest():
    masters = Masters(("tcp://m1:7070", "tcp://m2:7070"))
    assert masters.obeys(1, "slot_switch") and masters.obeys(2, "node_welcome")
    assert not masters.obeys(1, "slot_switch") and not masters.obeys(1, "launch_task")
    assert masters.obeys(2, "slot_switch") and masters.stale_refused == 2


def test_a_node_says_hello_to_the_masters_in_turn_and_goes_where_a_standby_points():
    masters = Masters(("tcp://m1:7070", "tcp://m2:7070", "tcp://m3:7070"))
    assert masters.hello_to(10.0) is None  # the first hello: to the first master
    assert masters.hello_to(12.5) is None  # again to it: its answer may be on its way
    assert masters.hello_to(13.0) == "tcp://m2:7070"  # unanswered for three seconds: the next
    assert masters.not_leader("tcp://m3:7070") == "tcp://m3:7070"
    masters.answered()
    assert masters.hello_to(14.0) is None
    masters.lost()  # the leader fell silent
    assert masters.hello_to(14.5) == "tcp://m1:7070"


def leader(client: MasterClient) -> str | None:
    found = client.leader()
    return None if found is None else found.endpoint


def task_pids(cluster, job_id: int) -> set[int]:
    from gangsched.deploy.local import task_processes

    return {process.pid for process in task_processes(cluster.home, job_id)}


def wait_for_the_gang(cluster, job_id: int) -> set[int]:
    """The pids of both tasks once each has become ``sleep``: a task starts as a shell that execs the program,
    and while it execs its environment cannot be read, so a count taken earlier may miss it."""
    from gangsched.deploy.local import task_processes

    def sleeping() -> bool:
        processes = task_processes(cluster.home, job_id)
        try:
            return len(processes) >= 2 and all(process.name() == "sleep" for process in processes)
        except psutil.Error:
            return False

    wait_until(sleeping, 20, "the gang to run")
    return task_pids(cluster, job_id)


def sleeper(seconds: int = 60) -> JobSpec:
    return JobSpec(name="gang", user=os.environ.get("USER") or "root", tasks=2, argv=["sleep", str(seconds)])


@pytest.mark.live
@pytest.mark.parametrize("fault", ["kill", "stop"])
def test_a_standby_takes_the_lead_from_a_failed_leader_and_every_gang_runs_on(start_cluster, database, fault):
    cluster = start_cluster(nodes=2, masters=2, store=database, lease_s=1.0)
    client, state = cluster.client, cluster.local.state()
    first, second = state.master.split(",")
    assert leader(client) == first and {m.role for m in client.masters()} == {MasterRole.ACTIVE, MasterRole.STANDBY}
    job_id = client.submit(sleeper())
    before = wait_for_the_gang(cluster, job_id)
    old = psutil.Process(state.pids["master"])
    old.send_signal(signal.SIGKILL if fault == "kill" else signal.SIGSTOP)
    try:
        wait_until(lambda: leader(client) == second, 20, "the standby to lead")
        wait_until(lambda: sum(node.state == "up" for node in client.nodes()) == 2, 20, "the nodes to register again")
        assert client.job(job_id).state is JobState.RUNNING and task_pids(cluster, job_id) == before, \
            "a task of the running gang was killed or restarted"
        after = client.submit(sleeper(1))
        assert ended(cluster, after, 30).state is JobState.COMPLETED
        log = cluster.local.log_path("master2").read_text()
        assert "leads at epoch 2" in log, log
        if fault == "stop":
            old.send_signal(signal.SIGCONT)
            wait_until(lambda: "lost the lead of epoch 1" in cluster.local.log_path("master").read_text(), 20,
                       "the continued leader to find itself fenced")
            wait_until(lambda: {m.endpoint: m.role for m in client.masters()}.get(first) is MasterRole.STANDBY, 20,
                       "it to stand by")
            assert leader(client) == second and client.job(job_id).state is JobState.RUNNING
    finally:
        if fault == "stop" and old.is_running():
            old.send_signal(signal.SIGCONT)
    info = client.job(job_id)
    assert info.state is JobState.RUNNING and info.requeues == 0


@pytest.mark.live
def test_root_moves_the_lead_to_a_standby_and_the_gang_runs_on(start_cluster, database):
    cluster = start_cluster(nodes=2, masters=2, store=database)
    client, state = cluster.client, cluster.local.state()
    first, second = state.master.split(",")
    job_id = client.submit(sleeper())
    before = wait_for_the_gang(cluster, job_id)
    moved = subprocess.run([sys.executable, "-m", "gangsched.cli", "admin", "takeover", "--master", state.master],
                           capture_output=True, text=True, timeout=60)
    assert moved.returncode == 0 and f"{second} leads (epoch 2); {first} stands by" in moved.stdout, moved.stderr
    wait_until(lambda: sum(node.state == "up" for node in client.nodes()) == 2, 20, "the nodes to register again")
    assert client.job(job_id).state is JobState.RUNNING and task_pids(cluster, job_id) == before
    assert {m.endpoint: m.role for m in client.masters()} == {first: MasterRole.STANDBY, second: MasterRole.ACTIVE}


@pytest.mark.live
def test_a_master_whose_postgresql_cannot_be_reached_says_so_in_one_line_and_exits(tmp_path):
    master = subprocess.run([sys.executable, "-m", "gangsched.cli", "master", "--state-dir", str(tmp_path),
                             "--store", f"postgresql://gangsched@/postgres?host={tmp_path}&port=5432"],
                            capture_output=True, text=True, timeout=60)
    errors = [line for line in master.stderr.splitlines() if " ERROR " in line]
    assert master.returncode == 2 and len(errors) == 1 and "cannot be reached" in errors[0], master.stderr


@pytest.mark.live
def test_takeovers_of_every_kind_lose_no_submission_and_no_task():
    from gangsched.bench.failover import FAULTS, run_failover, summary
    from gangsched.bench.isolation import shared_store
    from gangsched.deploy.config import ClusterConfig
    from gangsched.deploy.local import temporary_local_cluster

    if os.geteuid() != 0:
        pytest.skip("a cut master runs in a network namespace of its own, which root makes")
    # as gang bench failover makes it: the first master in a namespace, reached over TCP with keys
    # the server's account enters its folder: not below pytest's, which is root's alone
    config = ClusterConfig(nodes=2, masters=2, lease_s=1.0, quantum_ms=100, heartbeat_ms=100, http_bind="")
    with tempfile.TemporaryDirectory(prefix="gang-") as folder, \
            shared_store(config, Path(folder), cut=True) as (shared, namespace):
        assert namespace is not None
        with temporary_local_cluster(shared, namespace.confinement()) as cluster:
            result = run_failover(cluster, runs=4, faults=list(FAULTS), submissions=30, clients=3,
                                  namespace=namespace)
    assert [each.fault for each in result.takeovers] == list(FAULTS)
    assert (result.accepted, result.completed, result.lost, result.duplicates) == (30, 30, 0, 0), result
    assert result.gang_ran_on and result.stale_refused == 0, result
    assert [row["fault"] for row in summary(result.takeovers)] == list(FAULTS)


@pytest.mark.live
def test_a_local_cluster_of_two_masters_starts_and_stops_a_postgresql_server_of_its_own(tmp_path, postgres):
    from gangsched.deploy.config import ClusterConfig
    from gangsched.deploy.local import LocalCluster

    cluster = LocalCluster(tmp_path / "home")
    server = cluster._postgres()  # where it puts it: GANG_HOME, or for root a folder of /var/tmp
    try:
        state = cluster.up(ClusterConfig(nodes=1, masters=2, quantum_ms=100, http_bind=""))
        with cluster.client(state) as client:
            assert sorted(master.role for master in client.masters()) == [MasterRole.ACTIVE, MasterRole.STANDBY]
        assert (server.folder / "data" / "postmaster.pid").exists()
        assert "postgres" in cluster.down()
        assert not (server.folder / "data" / "postmaster.pid").exists()
    finally:
        cluster.down()
        shutil.rmtree(server.folder.parent if server.folder.parent != cluster.home else server.folder,
                      ignore_errors=True)


@pytest.mark.live
@pytest.mark.mpi
def test_an_mpi_job_runs_through_a_takeover_to_its_result(start_cluster, database, tmp_path):
    from gangsched.jobs.mpi_programs import build

    allreduce = build("allreduce", tmp_path)
    iterations = 3000  # a millisecond of CPU each: seconds, past the takeover
    cluster = start_cluster(nodes=2, processors_per_node=2, masters=2, store=database, lease_s=1.0)
    client, state = cluster.client, cluster.local.state()
    job = client.submit(mpi_job([str(allreduce), "--iterations", str(iterations), "--grain-ms", "1"], 4))
    wait_until(lambda: (client.job(job).barriers or 0) > 0, 30, "the job past MPI_Init, in its barriers")
    psutil.Process(state.pids["master"]).kill()
    assert client.job(job).barriers < iterations // 2, "the job was nearly done before the takeover"
    wait_until(lambda: leader(client) == state.master.split(",")[1], 20, "the standby to lead")
    info = ended(cluster, job, 120)
    assert info.state is JobState.COMPLETED and info.requeues == 0, info.reason
    assert f"result={iterations * (1 + 2 + 3 + 4)}" in task_output(cluster, job, "node1", 0)


@pytest.mark.live
def test_a_batch_job_runs_through_a_takeover_and_sacct_has_its_whole_record(start_cluster, database, tmp_path):
    cluster = start_cluster(nodes=2, masters=2, store=database, lease_s=1.0)
    client, state = cluster.client, cluster.local.state()
    folder = install_slurm_commands(tmp_path / "bin")
    output = tmp_path / "out.txt"
    job = submitted(cluster, folder, "-o", str(output), "--wrap", "echo start; sleep 4; echo done", cwd=tmp_path)
    wait_until(lambda: output.exists() and output.read_text() == "start\n", 20, "the batch step to run")
    psutil.Process(state.pids["master"]).kill()
    wait_until(lambda: leader(client) == state.master.split(",")[1], 20, "the standby to lead")
    info = ended(cluster, job, 60)
    assert (info.state, info.requeues, output.read_text()) == (JobState.COMPLETED, 0, "start\ndone\n")
    listed = command(cluster, folder, "sacct", "-j", str(job), "-P", "-n", "-o",
                     "JobID,State,ExitCode,Start,End,Elapsed")
    rows = [line.split("|") for line in listed.stdout.splitlines()]
    assert [row[:3] for row in rows] == [[str(job), "COMPLETED", "0:0"], [f"{job}.batch", "COMPLETED", "0:0"]], \
        listed.stdout + listed.stderr
    assert all("Unknown" not in row[3:5] and row[5] >= "00:00:04" for row in rows), rows


@pytest.mark.live
def test_a_standby_s_metrics_answer_503_naming_the_leader_and_its_web_view_only_reads(start_cluster, database):
    from gangsched.master.published import web_address

    cluster = start_cluster(nodes=1, masters=2, store=database, http_bind="127.0.0.1:0")
    first, second = cluster.local.state().master.split(",")
    leading, standing = (wait_until(functools.partial(web_address, cluster.home / name), 20, f"{name}'s web view")
                         for name in ("master", "master2"))
    tokens = [{"Authorization": f"Bearer {(cluster.home / name / 'web-token').read_text().strip()}"}
              for name in ("master", "master2")]
    status, text, _ = get(f"http://{leading}/metrics", tokens[0])
    assert status == 200 and "gangsched_" in text
    status, text, _ = get(f"http://{standing}/metrics", tokens[1])
    assert status == 503 and f"stands by: the leader is {first}" in text, text
    # what the web view's socket takes, a standby's too: only the read-only questions
    with MasterClient(f"ipc://{cluster.home / 'master2' / 'viewer' / 'viewer.sock'}") as viewer:
        with pytest.raises(RequestRefused, match="the web view only reads: not takeover"):
            viewer.request(Takeover(admin="root", to=second), TakeoverRequested)
    assert leader(cluster.client) == first


@pytest.mark.live
def test_the_store_lost_and_back_leaves_every_gang_running_and_a_master_leads_again(start_cluster, postgres_installed):
    from gangsched.deploy.postgres_server import postgres_tools, running

    tools = postgres_tools()
    assert tools is not None
    with tempfile.TemporaryDirectory(prefix="gang-postgres-") as folder, running(Path(folder)) as server:
        cluster = start_cluster(nodes=2, masters=2, store=server.url, lease_s=1.0)
        client = cluster.client
        job = client.submit(sleeper())
        before = wait_for_the_gang(cluster, job)
        server.stop(tools)  # both masters lose the store: the leader stops leading, and none leads
        try:
            wait_until(lambda: "lost the lead of epoch 1" in cluster.local.log_path("master").read_text(), 20,
                       "the leader to stand by without its store")
            assert task_pids(cluster, job) == before  # the nodes hold every task as last ordered
        finally:
            server.start(tools)
        wait_until(lambda: leader(client) is not None, 30, "a master to lead again")
        wait_until(lambda: sum(node.state == "up" for node in client.nodes()) == 2, 30, "the nodes back")
        info = client.job(job)
        assert info.state is JobState.RUNNING and task_pids(cluster, job) == before, info.reason
        assert ended(cluster, client.submit(sleeper(1)), 30).state is JobState.COMPLETED


@pytest.mark.live
def test_nodes_and_commands_find_the_masters_in_the_configuration_file(start_cluster, database, tmp_path):
    """[cluster] masters, Slurm's SlurmctldHost lines: first a master that never answers, then the standby,
    so both pass the first and follow the standby's answer."""
    cluster = start_cluster(nodes=1, masters=2, store=database)
    first, second = cluster.local.state().master.split(",")
    config = tmp_path / "gangsched.toml"
    config.write_text(f'[cluster]\nmasters = ["ipc://{tmp_path}/silent.sock", "{second}", "{first}"]\n')
    environment = {name: value for name, value in os.environ.items() if name not in ("GANG_MASTER", "GANG_HOME")}
    environment |= {"GANG_CONFIG": str(config), "GANG_HOME": str(tmp_path / "no-cluster")}
    node = subprocess.Popen([sys.executable, "-m", "gangsched.cli", "noded", "--config", str(config), "--name",
                             "filed", "--spool-dir", str(tmp_path / "filed"), "--peer-transport", "ipc",
                             "--log-file", str(tmp_path / "filed.log")], env=environment)
    try:
        wait_until(lambda: "filed" in {info.name for info in cluster.client.nodes() if info.state == "up"}, 30,
                   "the node to find the leader through the file")
        listed = subprocess.run([sys.executable, "-m", "gangsched.cli", "admin", "masters", "--json"], env=environment,
                                capture_output=True, text=True, timeout=60)
        assert listed.returncode == 0, listed.stderr
        assert "active" in listed.stdout and "standby" in listed.stdout
        config.write_text('[cluster]\nmasters = ["m1:7070"]\n')
        refused = subprocess.run([sys.executable, "-m", "gangsched.cli", "queue"], env=environment,
                                 capture_output=True, text=True, timeout=60)
        assert refused.returncode != 0
        assert f"{config}: cluster.masters[0]: 'm1:7070' is not a master's endpoint" in refused.stderr, refused.stderr
    finally:
        node.terminate()
        node.wait(timeout=15)
