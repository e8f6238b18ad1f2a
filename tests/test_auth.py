"""CURVE between master, nodes and clients: real daemons on loopback TCP, real keys."""

import contextlib
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import zmq

from gangsched.client.master_client import MasterClient, MasterUnreachable, RequestRefused
from gangsched.daemon.curve import NODE_USER, CurveError, KeyFolder, keygen
from gangsched.master.published import BoundEndpoints, bound_endpoints
from gangsched.noded.relay import NodeRelay
from gangsched.protocol.codec import encode
from gangsched.protocol.messages import JobList, JobQuery, NodeHello, NodeWelcome, TaskExit
from gangsched.protocol.records import Hold, JobSpec, JobState, PeerEndpoint, StepSpec
from tests.helpers.accounts import unix_account
from tests.helpers.clusters import wait_until


def daemon(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([sys.executable, "-m", "gangsched.cli", *args], stderr=subprocess.PIPE, text=True)


@dataclass
class Secured:
    """A master with CURVE keys on loopback, its key folder, and a second, foreign key folder."""

    endpoint: str
    reports: str
    switches: str
    keys: Path
    foreign: Path
    log: Path  # the master's
    started: list[subprocess.Popen[str]] = field(default_factory=list)  # ended by the fixture


@pytest.fixture
def secured(tmp_path):
    for user in ("gangalice", "gangbob"):  # a root node daemon runs a job as its user's account
        unix_account(user)
    keys, foreign = tmp_path / "keys", tmp_path / "foreign"
    keygen(keys, ["gangalice", "gangbob"])
    keygen(foreign, ["gangalice"])
    any_port = "tcp://127.0.0.1:*"  # the master binds any free one and says which (master/published.py)
    master = daemon("master", "--bind", any_port, "--switch-bind", any_port, "--report-bind", any_port,
                    "--state-dir", str(tmp_path / "state"), "--keys", str(keys), "--heartbeat-ms", "100",
                    "--log-file", str(tmp_path / "master.log"))
    bound = wait_until(lambda: bound_endpoints(tmp_path / "state"), 15, "the master to bind")
    assert isinstance(bound, BoundEndpoints)
    cluster = Secured(bound.client, bound.report, bound.switch, keys, foreign, tmp_path / "master.log", [master])
    try:
        yield cluster
    finally:
        for process in reversed(cluster.started):
            process.terminate()
            process.communicate(timeout=15)


def node(endpoint: str, keys: Path | None, name: str, tmp_path: Path) -> subprocess.Popen[str]:
    args = ["noded", "--master", endpoint, "--name", name, "--spool-dir", str(tmp_path / name),
            "--peer-transport", "ipc"]
    return daemon(*args, *(["--keys", str(keys)] if keys else []))


def spec(user: str) -> JobSpec:
    return JobSpec(name="sleep", user=user, tasks=1, argv=["sleep", "30"], cwd="/", env={})


@pytest.mark.live
def test_only_authorized_nodes_register_and_only_authorized_clients_are_answered(secured, tmp_path):
    endpoint, keys, foreign, started = secured.endpoint, secured.keys, secured.foreign, secured.started
    started += [node(endpoint, keys, "trusted", tmp_path), node(endpoint, foreign, "intruder", tmp_path),
                node(endpoint, None, "plain", tmp_path)]
    with MasterClient(endpoint, keys=keys, user="gangalice") as gangalice:
        wait_until(lambda: [n.name for n in gangalice.nodes()] == ["trusted"], 15, "the trusted node")
        job_id = gangalice.submit(spec("gangalice"))
        assert job_id == 1
    for stranger in (MasterClient(endpoint, timeout_s=1.0, keys=foreign, user="gangalice"),
                     MasterClient(endpoint, timeout_s=1.0)):
        with stranger, pytest.raises(MasterUnreachable):
            stranger.nodes()
    with MasterClient(endpoint, keys=keys, user="gangalice") as gangalice:
        assert [n.name for n in gangalice.nodes()] == ["trusted"], "an unauthorized node registered"


@pytest.mark.live
def test_the_user_is_the_key_not_the_name_a_message_gives(secured, tmp_path):
    endpoint, keys = secured.endpoint, secured.keys
    secured.started.append(node(endpoint, keys, "trusted", tmp_path))
    with MasterClient(endpoint, keys=keys, user="gangalice") as gangalice, \
            MasterClient(endpoint, keys=keys, user="gangbob") as gangbob:
        wait_until(lambda: gangalice.nodes(), 15, "the node")
        job_id = gangbob.submit(spec("gangalice"))  # gangbob claims to be gangalice
        assert [job.spec.user for job in gangalice.jobs([job_id])] == ["gangbob"]
        with pytest.raises(RequestRefused, match="belongs to gangbob"):
            gangalice.cancel(job_id, "gangbob")  # gangalice claims to be gangbob
        with pytest.raises(RequestRefused, match="belongs to gangbob"):  # nor may she run a step in it
            gangalice.start_step(job_id, "gangbob", StepSpec(argv=["id"]))
        gangbob.cancel(job_id, "whoever")


@pytest.mark.live
def test_another_users_job_shows_its_owner_and_shape_not_its_command_environment_or_folder(secured, tmp_path):
    endpoint, keys = secured.endpoint, secured.keys
    secured.started.append(node(endpoint, keys, "trusted", tmp_path))
    with MasterClient(endpoint, keys=keys, user="gangalice") as gangalice, \
            MasterClient(endpoint, keys=keys, user="gangbob") as gangbob:
        wait_until(lambda: gangalice.nodes(), 15, "the node")
        secret = spec("gangalice").model_copy(update={"env": {"API_TOKEN": "alice's"}, "cwd": "/tmp",
                                                      "script": "#!/bin/sh\nexport PASSWORD=alice\nsleep 30\n"})
        job_id = gangalice.submit(secret)
        (own,) = gangalice.jobs([job_id])
        assert (own.spec.env, own.spec.argv, own.spec.cwd) == ({"API_TOKEN": "alice's"}, ["sleep", "30"], "/tmp")
        assert "PASSWORD" in (own.spec.script or "")
        # a listing's brief answer leaves out what listings never print, even to the job's owner
        (listed,) = gangalice.job_maps([job_id], brief=True)
        assert (listed["spec"]["env"], listed["spec"]["script"], listed["spec"]["cwd"]) == ({}, None, "/tmp")
        # bob asks for it by its id, lists every job, and names himself the viewer: the key says who he is
        shown = [*gangbob.jobs([job_id]), *gangbob.jobs(), *gangbob.request(
            JobQuery(job_ids=[job_id], viewer="gangalice"), JobList).jobs]
        assert len(shown) == 3 and all(
            (info.spec.user, info.spec.tasks, info.spec.env, info.spec.argv, info.spec.cwd, info.spec.script) ==
            ("gangalice", 1, {}, ["(hidden)"], None, None) for info in shown), shown
        gangalice.cancel(job_id, "gangalice")


@pytest.mark.live
def test_slurm_s_commands_refuse_another_user_s_job_in_slurm_s_words(secured, slurm, tmp_path):
    """gangbob, with his own key, aims Slurm's commands at gangalice's jobs: nothing of hers changes, and each
    refusal is Slurm's line and status."""
    endpoint, keys = secured.endpoint, secured.keys
    secured.started.append(node(endpoint, keys, "trusted", tmp_path))
    with MasterClient(endpoint, keys=keys, user="gangalice") as gangalice:
        wait_until(lambda: gangalice.nodes(), 15, "the node")
        running = gangalice.submit(spec("gangalice"))
        (pending,) = gangalice.submit_jobs(spec("gangalice"), None, hold=True)
        wait_until(lambda: gangalice.job(running).state is JobState.RUNNING, 15, "her job to start")
        as_bob = {**os.environ, "GANG_MASTER": endpoint, "GANG_KEYS": str(keys), "LOGNAME": "gangbob"}

        def bob(*command: str) -> tuple[int, str]:
            done = subprocess.run([str(slurm / command[0]), *command[1:]], capture_output=True, text=True,
                                  env=as_bob)
            return done.returncode, done.stderr.strip()

        assert bob("scancel", str(running)) == (
            210, f"scancel: error: Kill job error on job id {running}: Access/permission denied")
        assert bob("scancel", "-u", "gangalice") == (
            210, f"scancel: error: Kill job error on job id {running}: Access/permission denied\n"
                 f"scancel: error: Kill job error on job id {pending}: Access/permission denied")
        assert bob("scancel", "--signal=KILL", str(running)) == (
            210, f"scancel: error: Kill job error on job id {running}: Access/permission denied")
        for action, job_id in [("release", pending), ("hold", pending), ("update", pending), ("suspend", running),
                               ("requeue", running)]:
            words = [f"JobId={job_id}", "TimeLimit=1"] if action == "update" else [str(job_id)]
            assert bob("scontrol", action, *words) == (1, f"Access/permission denied for job {job_id}"), action
        assert bob("sacct", "-n", "-X", "-j", str(running)) == (0, ""), "sacct shows him his own jobs alone"
        jobs = {job.job_id: job for job in gangalice.jobs([running, pending])}
        assert (jobs[running].state, jobs[pending].state, jobs[pending].hold) == (JobState.RUNNING,
                                                                                  JobState.PENDING, Hold.USER)
        assert jobs[pending].spec.estimate_s == 86_400 and not jobs[running].preemptions, "the master's default limit"
        gangalice.cancel(running, "gangalice")
        gangalice.cancel(pending, "gangalice")


@pytest.mark.live
def test_only_a_nodes_key_registers_a_node_or_reports(secured, tmp_path):
    endpoint, keys = secured.endpoint, secured.keys
    secured.started.append(node(endpoint, keys, "trusted", tmp_path))
    forged = zmq.Context.instance().socket(zmq.PUSH)
    forged.setsockopt(zmq.LINGER, 0)
    KeyFolder(keys).connect_as(forged, "gangalice")
    forged_events = forged.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    forged.connect(secured.reports)
    try:
        with MasterClient(endpoint, keys=keys, user="gangalice") as gangalice:
            wait_until(lambda: gangalice.nodes(), 15, "the node")
            job_id = gangalice.submit(spec("gangalice"))
            wait_until(lambda: gangalice.job(job_id).state is JobState.RUNNING, 15, "the job to start")
            fake = NodeHello(
                memory=1 << 30,
                host_memory=1 << 32,
                node="fake",
                cpu_share=1.0,
                pid=1,
                incarnation="x",
                peer=PeerEndpoint(transport="ipc", host="/tmp"),
            )
            with pytest.raises(RequestRefused, match="only a node's key registers a node"):
                gangalice.request(fake, NodeWelcome)
            with contextlib.suppress(zmq.Again):  # it has nowhere to go: no handshake completes
                forged.send(encode(TaskExit(node="trusted", job_id=job_id, rank=0, returncode=1)), zmq.NOBLOCK)
            wait_until(lambda: refused_handshake(forged_events), 10, "the report socket to refuse a user's key")
            assert gangalice.job(job_id).state is JobState.RUNNING, "a user's key ended a task"
            assert [n.name for n in gangalice.nodes()] == ["trusted"]
    finally:
        forged_events.close()
        forged.close()


def refused_handshake(events: zmq.Socket[bytes]) -> bool:
    """Whether a socket's monitor (EVENT_HANDSHAKE_FAILED_AUTH) told of a handshake the server refused."""
    return bool(events.poll(0)) and bool(events.recv_multipart())


@pytest.mark.live
def test_a_users_key_that_names_itself_as_a_node_gets_nothing_and_leaves_the_node_undisturbed(secured, tmp_path):
    endpoint, keys = secured.endpoint, secured.keys
    secured.started.append(node(endpoint, keys, "trusted", tmp_path))
    context = zmq.Context.instance()
    impostor = context.socket(zmq.DEALER)
    impostor.setsockopt(zmq.LINGER, 0)
    impostor.setsockopt(zmq.ROUTING_ID, b"trusted")  # the node's name: the route it had before
    KeyFolder(keys).connect_as(impostor, "gangalice")
    listener = context.socket(zmq.SUB)  # the switches, which only nodes hear
    listener.setsockopt(zmq.LINGER, 0)
    listener.setsockopt(zmq.SUBSCRIBE, b"")
    KeyFolder(keys).connect_as(listener, "gangalice")
    listener_events = listener.get_monitor_socket(zmq.EVENT_HANDSHAKE_FAILED_AUTH)
    try:
        with MasterClient(endpoint, keys=keys, user="gangbob") as gangbob:
            wait_until(lambda: gangbob.nodes(), 15, "the node")
            impostor.connect(endpoint)
            listener.connect(secured.switches)
            job_id = gangbob.submit(spec("gangbob").model_copy(update={"env": {"API_TOKEN": "bob's secret"}}))
            wait_until(lambda: gangbob.job(job_id).state is JobState.RUNNING, 15, "the job to start on the node")
            wait_until(lambda: refused_handshake(listener_events), 10, "the switch to refuse a user's key")
            assert not impostor.poll(1000), "a user's key received a node's order"
            assert not listener.poll(0), "a user's key heard a switch"
            impostor.send(encode(NodeHello(memory=1 << 30, host_memory=1 << 32, node="trusted", cpu_share=1.0, pid=1,
                                           incarnation="forged", peer=PeerEndpoint(transport="ipc", host="/tmp"))))
            assert impostor.poll(5000) and b"only a node's key registers a node" in impostor.recv()
            wait_until(lambda: "refused a message from b'trusted' (key: gangalice)" in secured.log.read_text(), 10,
                       "the master to log the impostor")
            impostor.close()
            gangbob.cancel(job_id, "gangbob")  # it reaches the node: the impostor took nothing of its route
            wait_until(lambda: gangbob.job(job_id).state is JobState.CANCELLED, 15, "the job to be cancelled")
            assert [n.name for n in gangbob.nodes()] == ["trusted"]
    finally:
        impostor.close()
        listener_events.close()
        listener.close()


@pytest.mark.live
@pytest.mark.parametrize("host", ["0.0.0.0", "127.0.0.1"])
def test_a_master_without_keys_refuses_tcp_even_on_loopback(tmp_path, host):
    master = daemon("master", "--bind", f"tcp://{host}:*", "--state-dir", str(tmp_path / "state"))
    _, log = master.communicate(timeout=15)
    assert master.returncode == 2 and "lets in every account that reaches it: without --keys" in log, log


@pytest.mark.live
def test_a_master_without_keys_refuses_an_ipc_socket_others_may_reach(tmp_path):
    shared = tmp_path / "shared"
    shared.mkdir(mode=0o755)
    shared.chmod(0o755)
    master = daemon("master", "--bind", f"ipc://{shared}/master.sock", "--state-dir", str(tmp_path / "state"))
    _, log = master.communicate(timeout=15)
    assert master.returncode == 2 and "which other accounts may enter" in log, log


@pytest.mark.live
@pytest.mark.skipif(os.geteuid() != 0, reason="a second account needs root to make and to become")
def test_another_account_cannot_reach_a_master_without_keys(start_cluster):
    """The default master (ipc sockets in a 0700 folder): another account's connect is refused by the kernel."""
    stranger = unix_account("gangbob")
    assert stranger is not None
    socket_path = start_cluster(nodes=1).client.endpoint.removeprefix("ipc://")
    child = os.fork()
    if child == 0:  # the stranger: only the connect, then out (exit status 0: refused)
        status = 3
        try:
            os.setgroups([])
            os.setresgid(stranger.pw_gid, stranger.pw_gid, stranger.pw_gid)
            os.setresuid(stranger.pw_uid, stranger.pw_uid, stranger.pw_uid)
            with socket.socket(socket.AF_UNIX) as probe:
                probe.connect(socket_path)
            status = 1
        except PermissionError:
            status = 0
        finally:
            os._exit(status)
    assert os.waitstatus_to_exitcode(os.waitpid(child, 0)[1]) == 0, "another account reached the master"


def test_keygen_writes_secret_keys_for_their_owner_only_and_refuses_reserved_names(tmp_path):
    keygen(tmp_path / "keys", ["gangalice"])
    secrets = list((tmp_path / "keys").rglob("*.key_secret"))
    assert len(secrets) == 3 and all(path.stat().st_mode & 0o777 == 0o600 for path in secrets)
    node_key = (tmp_path / "keys" / "authorized" / "node.key").read_bytes()
    with pytest.raises(CurveError, match="'node' names the node's key"):
        keygen(tmp_path / "keys", ["node"])
    assert (tmp_path / "keys" / "authorized" / "node.key").read_bytes() == node_key


def test_a_relay_lets_in_the_nodes_key_only(tmp_path):
    """A node relaying over tcp with keys: a frame pushed with a user's key never reaches it,
    one pushed with the nodes' key does (real CURVE handshakes, its ZAP handler in a thread)."""
    keygen(tmp_path / "keys", ["gangalice"])
    keys = KeyFolder(tmp_path / "keys")
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context()
    relay = NodeRelay.open(context, tmp_path / "spool", keys, "127.0.0.1")
    assert relay is not None and relay.endpoints.report.startswith("tcp://127.0.0.1:")
    pushes = []
    try:
        for name in ("gangalice", NODE_USER):
            push = context.socket(zmq.PUSH)
            push.setsockopt(zmq.LINGER, 0)
            keys.connect_as(push, name)
            push.curve_serverkey = keys.server_key(relay=True)
            push.connect(relay.endpoints.report)
            push.send(name.encode())
            pushes.append(push)
        assert relay.pull.poll(10_000) and relay.pull.recv() == NODE_USER.encode()
        assert not relay.pull.poll(500), "a user's key spoke through a relay"
    finally:
        for push in pushes:
            push.close()
        relay.close()
        context.term()


def test_a_node_without_keys_over_tcp_offers_no_relay(tmp_path):
    assert NodeRelay.open(zmq.Context.instance(), tmp_path / "spool", None, "127.0.0.1") is None


@pytest.fixture
def relay_fanout_one(monkeypatch):
    """A master started after it homes the second node on: a relay, then nodes at it."""
    monkeypatch.setenv("GANG_MASTER_RELAY_FANOUT", "1")


@pytest.mark.live
def test_nodes_relay_for_each_other_over_tcp_with_keys(relay_fanout_one, secured, tmp_path):
    endpoint, keys = secured.endpoint, secured.keys
    with MasterClient(endpoint, keys=keys, user="gangalice") as gangalice:
        for count, name in enumerate(("direct", "relay", "relayed"), start=1):  # in turn: the order makes the tree
            secured.started.append(daemon("noded", "--master", endpoint, "--name", name, "--keys", str(keys),
                                          "--spool-dir", str(tmp_path / name), "--peer-transport", "tcp",
                                          "--peer-host", "127.0.0.1"))
            wait_until(lambda count=count: len(gangalice.nodes()) == count, 15, f"node {name}")
        assert {n.name: n.via for n in gangalice.nodes()} == {"direct": None, "relay": None, "relayed": "relay"}
        job_id = gangalice.submit(JobSpec(name="true", user="gangalice", tasks=3, argv=["true"], cwd="/", env={}))
        # it completes once every rank's exit reached the master: the relayed node's through its relay
        info = wait_until(lambda: (job := gangalice.job(job_id)).state.is_final and job, 30, "the job to end")
        assert info.state is JobState.COMPLETED, info.reason


@pytest.mark.live
def test_a_users_reconfigure_is_refused_before_roots_configuration_file_is_read(tmp_path):
    keys = tmp_path / "keys"
    keygen(keys, ["gangalice", "root"])
    config = tmp_path / "gangsched.toml"
    config.write_text("[master]\nquantum_ms = 100\n")
    any_port = "tcp://127.0.0.1:*"
    master = daemon("master", "--bind", any_port, "--switch-bind", any_port, "--report-bind", any_port,
                    "--state-dir", str(tmp_path / "state"), "--keys", str(keys), "--config", str(config))
    try:
        bound = wait_until(lambda: bound_endpoints(tmp_path / "state"), 15, "the master to bind")
        assert isinstance(bound, BoundEndpoints)
        with MasterClient(bound.client, keys=keys, user="gangalice") as gangalice, \
                MasterClient(bound.client, keys=keys, user="root") as root:
            wait_until(lambda: answered(root), 30, "the master to answer")  # it read the file whole by then
            config.write_text("[master]\nsecret_setting_of_roots = 'root-only path /etc/shadow'\n")
            with pytest.raises(RequestRefused) as refused:
                gangalice.reconfigure()
            assert "only root reconfigures" in refused.value.reason and "secret" not in refused.value.reason
            with pytest.raises(RequestRefused, match="secret_setting_of_roots"):  # root is told what is wrong
                root.reconfigure()
    finally:
        master.terminate()
        master.communicate(timeout=15)


def answered(client: MasterClient) -> bool:
    """Whether the master answers ``client`` now (a master that just bound may not yet)."""
    try:
        return bool(client.nodes() is not None)
    except MasterUnreachable:
        return False
