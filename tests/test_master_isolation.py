"""The leading master cut off from everything, really: it runs in a network namespace of its own, joined
to this one by a veth pair, with addresses that exist only on that pair; the test takes the link down.
The standby (in this namespace) takes the lead once the leader's lease has run out; the node's gang
runs on; the cut-off leader, its link back up, finds itself fenced and stands by (docs/architecture.md,
"Leadership"). Over TCP, so with CURVE keys, as masters on real hosts would be; on fixed ports, free
because the addresses exist only on the pair the test made."""

import getpass
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from gangsched.bench.isolation import HOST, INNER, Namespace, isolated
from gangsched.client.master_client import MasterClient, MasterUnreachable
from gangsched.daemon.curve import keygen
from gangsched.deploy.postgres_server import running
from gangsched.protocol.leadership_messages import MasterRole
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import wait_until

pytestmark = pytest.mark.live

@pytest.fixture
def namespace() -> Iterator[Namespace]:
    if os.geteuid() != 0:
        pytest.skip("network namespaces are made by root")
    with isolated() as made:
        yield made


@pytest.fixture
def reachable_postgres(postgres_installed) -> Iterator[str]:
    """A PostgreSQL server listening on this namespace's end of the pair too: its URL there."""
    with tempfile.TemporaryDirectory(prefix="gang-postgres-") as folder, running(Path(folder), HOST) as server:
        yield server.url


def gang(*argv: str) -> list[str]:
    return [sys.executable, "-m", "gangsched.cli", *argv]


def master(keys: Path, state: Path, host: str, port: int, store: str) -> list[str]:
    """A master's command, its three sockets on ``host`` from ``port`` on."""
    return gang("master", "--keys", str(keys), "--state-dir", str(state), "--store", store,
                *(part for offset, kind in enumerate(("bind", "switch-bind", "report-bind"))
                  for part in (f"--{kind}", f"tcp://{host}:{port + offset}")),
                "--lease-s", "1.0", "--quantum-ms", "100", "--heartbeat-ms", "100", "--rejoin-s", "20",
                "--realtime-priority", "0")


def answering(client: MasterClient) -> object:
    """The masters, once one answers within the client's second: the first may still be starting (its
    start took 0.9 s and more with a docker engine running beside it, and its answer came too late)."""
    try:
        return client.masters()
    except MasterUnreachable:
        return None


def test_a_leader_cut_off_loses_the_lead_and_a_gang_runs_on(namespace, reachable_postgres, tmp_path):
    user = getpass.getuser()
    keys = tmp_path / "keys"
    keygen(keys, [user])
    with psycopg.connect(reachable_postgres, autocommit=True) as admin:
        admin.execute("CREATE DATABASE isolation")
    store = reachable_postgres.replace("/postgres?", "/isolation?")
    first, second = f"tcp://{INNER}:7070", f"tcp://{HOST}:7170"
    logs = {name: open(tmp_path / f"{name}.log", "w") for name in ("m1", "m2", "node")}
    started = [subprocess.Popen([*namespace.prefix(), *master(keys, tmp_path / "m1", INNER, 7070, store)],
                                stderr=logs["m1"])]
    try:
        with MasterClient(f"{first},{second}", timeout_s=1.0, keys=keys, user=user) as client:
            wait_until(lambda: answering(client), 20, "the first master to lead")
            started.append(subprocess.Popen(master(keys, tmp_path / "m2", HOST, 7170, store), stderr=logs["m2"]))
            started.append(subprocess.Popen(gang("noded", "--master", f"{first},{second}", "--keys", str(keys),
                                                 "--name", "n1", "--spool-dir", str(tmp_path / "n1"),
                                                 "--peer-transport", "ipc", "--processors", "2", "--memory", "256M",
                                                 "--realtime-priority", "0"), stderr=logs["node"]))
            roles = lambda: {m.endpoint: m.role for m in client.masters()}  # noqa: E731
            wait_until(lambda: roles() == {first: MasterRole.ACTIVE, second: MasterRole.STANDBY}, 20,
                       "the second master to stand by")
            wait_until(lambda: [n.state for n in client.nodes()] == ["up"], 20, "the node")
            job = client.submit(JobSpec(name="gang", user=user, tasks=2, argv=["sleep", "60"]))
            wait_until(lambda: client.job(job).state is JobState.RUNNING, 20, "the gang to run")
            namespace.link(up=False)
            wait_until(lambda: roles().get(second) is MasterRole.ACTIVE, 20, "the standby to lead")
            wait_until(lambda: [n.state for n in client.nodes()] == ["up"], 20, "the node with the new leader")
            assert client.job(job).state is JobState.RUNNING and client.job(job).requeues == 0
            assert "leads at epoch 2" in (tmp_path / "m2.log").read_text()
            namespace.link(up=True)
            wait_until(lambda: "lost the lead of epoch 1" in (tmp_path / "m1.log").read_text(), 30,
                       "the cut-off leader to find itself fenced")
            wait_until(lambda: any(m.endpoint == first and m.role is MasterRole.STANDBY and m.seen_s < 0.5
                                   for m in client.masters()), 20, "it to stand by, heard from again")
            assert client.job(job).state is JobState.RUNNING
            client.cancel(job, user)
    finally:
        for process in reversed(started):
            process.terminate()
        for process in started:
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
        for log in logs.values():
            log.close()
