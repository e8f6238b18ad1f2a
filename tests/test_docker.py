"""The docker-compose cluster, with real containers: faults a real cluster meets.

Each test brings up its own compose project (4 node containers, 200 ms quanta,
400 ms heartbeats) and takes it down with its volumes. Three missed heartbeats
take longer than a second, the period of a container's real-time budget: a
daemon that spent its budget early in a second waits out the rest of it, and
on a busy two-core machine that is no lost node. The engine, the image and
the keys are made as a user's `gang cluster up --docker` makes them.
"""

import getpass
import os
import pwd
import shutil
import subprocess
import tempfile
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gangsched.bench.migration import run_migration
from gangsched.bench.throughput import flood
from gangsched.client.master_client import MasterClient
from gangsched.daemon.curve import keygen
from gangsched.deploy.compose import DockerCluster, project_dir
from gangsched.deploy.config import ClusterConfig
from gangsched.jobs.adversaries import RESUMES_ITSELF
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.protocol.records import JobSpec, JobState, MpiKind, NodeState
from tests.helpers.accounts import unix_account
from tests.helpers.clusters import wait_until

pytestmark = pytest.mark.docker

HEARTBEAT_S = 0.4
QUANTUM_S = 0.2
FOREVER = SyntheticJob("compute", iterations=0)
WEB_BIND = "127.0.0.1:8471"  # not the default port, which a user's local cluster may hold
USER = "gangalice"  # a second account, where the tests run as root


class Compose:
    def __init__(self, cluster: DockerCluster, client: MasterClient) -> None:
        self.cluster, self.client = cluster, client

    def node_container(self, index: int = 0) -> tuple[str, str]:
        """A node container's id and the node name it registered as (its hostname)."""
        container = self.cluster.containers("node")[index]
        return container, self.container_hostname(container)

    def container_hostname(self, container: str) -> str:
        return docker("inspect", "-f", "{{.Config.Hostname}}", container).strip()

    def node_state(self, name: str) -> NodeState | None:
        return next((node.state for node in self.client.nodes() if node.name == name), None)

    def job(self, job_id: int):  # -> JobInfo
        return self.client.jobs([job_id], include_finished=True)[0]


def docker(*args: str) -> str:
    return subprocess.run(["docker", *args], check=True, capture_output=True, text=True).stdout


def task_commands(container: str) -> list[str]:
    """The synthetic tasks alive in a container, with their process states."""
    listing = docker("exec", container, "ps", "-eo", "stat=,args=")
    return [line for line in listing.splitlines() if "gangsched.jobs.synthetic" in line]


@pytest.fixture(scope="session", autouse=True)
def docker_engine() -> None:
    """A running engine with a real-time budget: installed and started if this machine has none."""
    subprocess.run(["sh", str(project_dir() / "deploy" / "ensure-docker.sh")], check=True)


@pytest.fixture
def compose(request: pytest.FixtureRequest) -> Iterator[Compose]:
    """A compose cluster under policy gs, or the one the test names as the fixture's parameter."""
    home = Path(tempfile.mkdtemp(prefix="gang-d-"))
    cluster = DockerCluster(home, port=7170, project="gangsched-test")
    if unix_account(USER) is not None:  # the nodes see the host's accounts as they are at `up`
        keygen(cluster.keys, [USER])
    config = ClusterConfig(nodes=4, quantum_ms=int(QUANTUM_S * 1000), heartbeat_ms=int(HEARTBEAT_S * 1000),
                           node_kill_grace_s=1.0, policy=getattr(request, "param", "gs"), http_bind=WEB_BIND)
    try:
        state = cluster.up(config)
        with MasterClient(state.master, keys=cluster.keys) as client:
            yield Compose(cluster, client)
    finally:
        cluster.down()
        shutil.rmtree(home, ignore_errors=True)
        assert not docker("ps", "-aq", "--filter", "label=com.docker.compose.project=gangsched-test").strip()


def test_a_killed_node_container_is_down_within_three_heartbeats_and_the_rest_go_on(compose):
    client = compose.client
    job_id = client.submit(job_spec(FOREVER, 4))
    client.wait_until_running([job_id], 30)
    container, name = compose.node_container()
    docker("kill", container)
    wait_until(lambda: compose.node_state(name) is NodeState.DOWN, 15, "the node to be marked down")
    failed = wait_until(lambda: (info := compose.job(job_id)).state is JobState.NODE_FAIL and info, 10,
                        "its job to fail")
    assert failed.reason == f"node {name} missed 3 heartbeats"  # for its silence, not anything else
    survivor = client.submit(job_spec(SyntheticJob("compute", iterations=20), 3))
    ended = wait_until(lambda: (info := compose.job(survivor)).state.is_final and info, 30, "a job on the other nodes")
    assert ended.state is JobState.COMPLETED, ended.reason  # says which node was lost, if one was


def test_a_restarted_master_loses_no_job(compose):
    client = compose.client
    jobs = [client.submit(job_spec(FOREVER, 4)) for _ in range(2)]
    queued = client.submit(job_spec(FOREVER, 4).model_copy(update={"exclusive": True}))
    before = {job.job_id: job.barriers for job in client.wait_until_running(jobs, 30)}
    compose.cluster.compose("restart", "-t", "5", "master")
    wait_until(lambda: sum(node.state is NodeState.UP for node in _nodes(client)) == 4, 30, "nodes back")
    wait_until(lambda: all(job.barriers > before[job.job_id] + 5 for job in client.jobs(jobs)), 30,
               "the running jobs to go on")
    assert {job.job_id: job.state for job in client.jobs([*jobs, queued])}.keys() == {*jobs, queued}


def test_a_node_cut_from_the_network_is_lost_and_rejoins_empty(compose):
    client = compose.client
    job_id = client.submit(job_spec(FOREVER, 4))
    client.wait_until_running([job_id], 30)
    container, name = compose.node_container()
    network = f"{compose.cluster.project}_default"
    docker("network", "disconnect", network, container)
    wait_until(lambda: compose.node_state(name) is NodeState.DOWN, 10, "the cut node to be marked down")
    wait_until(lambda: compose.job(job_id).state is JobState.NODE_FAIL, 5, "its job to fail")
    assert task_commands(container), "the cut node's task should still run until it hears from the master"
    docker("network", "connect", network, container)
    wait_until(lambda: compose.node_state(name) is NodeState.UP, 30, "the node to rejoin")
    wait_until(lambda: not task_commands(container), 10, "its orphaned task to be killed")


def test_a_node_daemon_restarting_in_its_container_leaves_no_task_behind(compose):
    client = compose.client
    job_id = client.submit(job_spec(FOREVER, 4))
    client.wait_until_running([job_id], 30)
    container, name = compose.node_container()
    assert task_commands(container)
    docker("restart", "-t", "5", container)
    wait_until(lambda: compose.node_state(name) is NodeState.UP, 30, "the node to come back")
    assert not task_commands(container), "a task outlived its node daemon"
    # the daemon's last exit (rank killed at shutdown) fails it, or the next daemon's hello without the rank
    wait_until(lambda: compose.job(job_id).state.is_final, 10, "its job to end")


@pytest.mark.parametrize("compose", ["mgs"], indirect=True)
def test_a_job_migrates_between_node_containers_through_the_shared_volume(compose):
    run = run_migration(compose.client)
    names = sorted(node.name for node in compose.client.nodes())
    assert run.moved_from == names[:1] and run.moved_to == names[3:]
    assert run.checkpointed_at >= run.barriers_before >= 5
    assert run.checkpointed_at < run.barriers_after <= run.checkpointed_at + 3  # not from zero
    assert 0 < run.cost_s < run.checkpointed_at * 0.1 / 2


MPI_PROGRAMS = {  # each prints its result on rank 0; 4 ranks, one per node container
    "c": (MpiKind.PMI1, ["/opt/gang/libexec/allreduce", "--iterations", "200", "--grain-ms", "0"], "result=2000"),
    "mpi4py": (MpiKind.PMI1, ["python", "-c", "from mpi4py import MPI; c = MPI.COMM_WORLD; "
                              "print('total=%d' % c.allreduce(c.Get_rank() + 1))"], "total=10"),
    "openmpi": (MpiKind.PMIX, ["/opt/gang/libexec/allreduce-openmpi", "--iterations", "200", "--grain-ms", "0"],
                "result=2000"),
}


@pytest.mark.mpi
@pytest.mark.parametrize("program", MPI_PROGRAMS)
def test_mpi_ranks_in_four_node_containers_talk_over_tcp(compose, program):
    mpi, argv, expected = MPI_PROGRAMS[program]
    job_id = compose.client.submit(JobSpec(name=f"mpi-{program}", user=getpass.getuser(), tasks=4, nodes=4,
                                           mpi=mpi, argv=argv, cwd="/"))
    info = wait_until(lambda: (job := compose.job(job_id)).state.is_final and job, 60, "the MPI job to end")
    assert info.state is JobState.COMPLETED, info.reason
    assert len(set(info.node_names)) == 4
    container = next(container for container in compose.cluster.containers("node")
                     if compose.container_hostname(container) == info.node_names[0])
    output = docker("exec", container, "cat", f"/root/.gangsched/nodes/{info.node_names[0]}/job-{job_id}.0.out")
    assert expected in output, output


def _nodes(client: MasterClient) -> list:
    try:
        return client.nodes()
    except Exception:  # the master is still starting
        return []


@pytest.mark.skipif(os.geteuid() != 0, reason="a second account needs root to make")
def test_a_users_job_runs_as_that_user_in_a_node_container(compose):
    state = compose.cluster.state()
    assert state is not None
    with MasterClient(state.master, keys=compose.cluster.keys, user=USER) as client:
        # the message says root; the key says whose job it is
        job = client.submit(JobSpec(name="mine", user="root", tasks=1, argv=["sh", "-c", "id -un; id -u"]))
        wait_until(lambda: compose.job(job).state.is_final, 60, "the job to end")
    info = compose.job(job)
    assert info.state is JobState.COMPLETED, info.reason
    container = next(
        c for c in compose.cluster.containers("node") if compose.container_hostname(c) == info.node_names[0]
    )
    output = docker("exec", container, "cat", f"/var/spool/gangsched/{info.node_names[0]}/{USER}/job-{job}.0.out")
    assert output.split() == [USER, str(pwd.getpwnam(USER).pw_uid)] and output.split()[1] != "0"


def test_the_web_view_is_published_on_the_host_behind_the_masters_token(compose):
    token = compose.cluster.web_token()
    assert (compose.cluster.home / "web-token").read_text().strip() == token

    def get(path: str, **headers: str) -> tuple[int, bytes]:
        request = urllib.request.Request(f"http://{WEB_BIND}{path}", headers=headers)
        try:
            with urllib.request.urlopen(request, timeout=5) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    assert get("/api/state")[0] == 401  # the master binds every address of its container: a token is asked
    status, body = get("/metrics", Authorization=f"Bearer {token}")
    assert status == 200 and b"gangsched_nodes" in body, body[:300]
    assert get(f"/?token={token}")[0] == 200


def test_a_descheduled_task_in_a_node_container_is_frozen_in_a_group_of_the_hosts(compose):
    """A node container's own cgroups are read only: it makes its task groups in a folder of the host's
    cgroup v2 hierarchy mounted into it, and freezes a descheduled task there, its timer's SIGCONTs
    notwithstanding."""
    folder = compose.cluster.node_cgroup_folder()
    if not (folder / "cgroup.procs").exists():
        pytest.skip("this host's cgroup v2 hierarchy carries the containers' limits: the node containers hold "
                    "tasks by process tree")
    user = getpass.getuser()
    greedy = compose.client.submit(JobSpec(name="greedy", user=user, tasks=4, argv=["python3", "-c", RESUMES_ITSELF]))
    honest = compose.client.submit(JobSpec(name="honest", user=user, tasks=4, argv=FOREVER.argv()))

    def frozen(job_id: int) -> bool:
        return any("frozen 1" in (group / "cgroup.events").read_text().splitlines()
                   for group in groups_of(folder, job_id))

    wait_until(lambda: frozen(greedy), 30, "the greedy job's tasks frozen in their host groups")
    wait_until(lambda: not frozen(greedy), 10, "thawed in its own quantum")
    wait_until(lambda: frozen(greedy), 10, "and frozen again")
    assert compose.job(greedy).state is JobState.RUNNING
    for job_id in (greedy, honest):
        compose.client.cancel(job_id, user)
    wait_until(lambda: not groups_of(folder, greedy), 30, "the job's groups emptied")


def groups_of(folder: Path, job_id: int) -> list[Path]:
    """The task groups below ``folder`` that hold a process of the job (a node names a group for its place,
    ``task-N``: an emptied one holds its next task)."""
    found = []
    for group in folder.glob("gangsched-*/task-*"):
        try:
            pids = (group / "cgroup.procs").read_text().split()
            if any(psutil.Process(int(pid)).environ().get("GANG_JOB_ID") == str(job_id) for pid in pids):
                found.append(group)
        except (OSError, psutil.Error):
            continue
    return found


def test_a_small_flood_on_node_containers_is_counted_to_its_last_job_written(compose):
    """`gang bench throughput --docker`: the master's store read from its volume on the host."""
    run = flood(compose.client, compose.cluster.master_store(), 20, 2, None, ["/bin/true"], floor_s=None)
    assert run.samples[-1]["completed"] == 20 and run.samples[-1]["pending"] == 0
    assert run.switch_flood_p50_ms > 0


def test_a_compose_cluster_starts_from_a_configuration_file_and_preempts(tmp_path):
    """Node containers named as the file names them, each with what it declares; two partitions of two tiers."""
    home = Path(tempfile.mkdtemp(prefix="gang-d-"))
    cluster = DockerCluster(home, port=7170, project="gangsched-test")
    path = tmp_path / "gangsched.toml"
    path.write_text('[master]\nquantum_ms = 200\n[[nodes]]\nnames = "n[1-2]"\nprocessors = 2\nmemory = "512M"\n'
                    '[[partitions]]\nname = "batch"\npreempt_mode = "suspend"\n'
                    '[[partitions]]\nname = "debug"\nnodes = "n1"\npriority_tier = 2\nquantum_ms = 100\n')
    try:
        state = cluster.up(ClusterConfig.from_file(path, heartbeat_ms=int(HEARTBEAT_S * 1000), http_bind=""))
        with MasterClient(state.master, keys=cluster.keys) as client:
            nodes = {node.name: node for node in client.nodes()}
            assert sorted(nodes) == ["n1", "n2"] and {node.processors for node in nodes.values()} == {2}
            assert {node.memory for node in nodes.values()} == {512 << 20}  # the debug job fits beside the batch
            user = getpass.getuser()
            batch = client.submit(JobSpec(name="spin", user=user, tasks=4, argv=["sh", "-c", "while :; do :; done"]))
            wait_until(lambda: client.job(batch).state is JobState.RUNNING, 30, "the batch gang to run")
            debug = client.submit(JobSpec(name="quick", user=user, tasks=2, argv=["sleep", "2"], partition="debug"))
            wait_until(lambda: client.job(batch).state is JobState.SUSPENDED, 30, "the batch gang to be suspended")
            assert client.job(debug).node_names == ["n1", "n1"]
            wait_until(lambda: client.jobs([debug], include_finished=True)[0].state is JobState.COMPLETED, 30,
                       "the debug job to end")
            wait_until(lambda: client.job(batch).state is JobState.RUNNING, 30, "the batch gang to resume")
            client.cancel(batch, user)
    finally:
        cluster.down()
        shutil.rmtree(home, ignore_errors=True)
        assert not docker("ps", "-aq", "--filter", "label=com.docker.compose.project=gangsched-test").strip()
