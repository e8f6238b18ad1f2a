"""The suite's fixtures: real local clusters, Debian's packages, a PostgreSQL server, Unix accounts, the fake
clock, and the fast tier's refusal to start a process. What tests share besides fixtures is in
tests/helpers/, which no test reaches through this module."""

import contextlib
import itertools
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from gangsched.daemon.curve import keygen
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import LocalCluster, progress_folder, task_processes
from gangsched.deploy.postgres_server import PostgresServer, postgres_tools, running
from gangsched.deploy.unix_accounts import remove_unix_account
from gangsched.master.job_record import raise_illegal_transitions
from tests.helpers.accounts import made_accounts, unix_account
from tests.helpers.clusters import Cluster, memory_groups, wait_until
from tests.helpers.debian import DebianPackages
from tests.helpers.driven_master import FakeClock
from tests.helpers.slurm_commands import install_slurm_commands
from tests.helpers.tiers import PROCESS_TIERS, no_process_started

raise_illegal_transitions()  # a transition a job's life does not have fails the test that makes it


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def alice_and_bob() -> None:
    """Two accounts the master's host knows (made where the tests run as root)."""
    if None in [unix_account(name) for name in ("alice", "bob")]:
        pytest.skip("the accounts alice and bob are made only where the tests run as root")


@pytest.fixture(scope="session", autouse=True)
def _test_machine_state() -> Iterator[None]:
    """Other users' task outputs go to a folder of this session's, not the machine's
    /var/spool/gangsched, so no run reads an earlier run's files; the folder and the
    accounts the tests made are gone afterwards."""
    spool = Path(tempfile.mkdtemp(prefix="gang-user-spool-"))
    spool.chmod(0o711)  # the users' own folders below it are 0700; they need to pass through
    os.environ["GANG_NODE_USER_SPOOL_DIR"] = str(spool)
    yield
    del os.environ["GANG_NODE_USER_SPOOL_DIR"]
    shutil.rmtree(spool, ignore_errors=True)
    for name in made_accounts:
        remove_unix_account(name)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item) -> Iterator[None]:
    """The fast tier starts no process (docs/architecture.md, "Tests in tiers"), nor do the fixtures it sets up,
    a session's among them: a test that does fails, with the reason, unless marked for a tier that may. (The
    teardown is free: a session's fixtures end in whichever test comes last.)"""
    with _fast_tier(item):
        return (yield)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    with _fast_tier(item):
        return (yield)


def _fast_tier(item: pytest.Item) -> contextlib.AbstractContextManager[None]:
    if any(item.get_closest_marker(tier) for tier in PROCESS_TIERS):
        return contextlib.nullcontext()
    return no_process_started(item.nodeid)


@pytest.fixture(scope="session")
def debian() -> DebianPackages:
    return DebianPackages()


@pytest.fixture
def start_cluster() -> Iterator[Callable[..., Cluster]]:
    """Start clusters with short quanta and heartbeats; stop them and check nothing is left."""
    started: list[Cluster] = []

    def start(key_users: tuple[str, ...] = (), **shape: object) -> Cluster:
        """``key_users``: users whose keys are made before the cluster starts (with ``keys=True``)."""
        home = Path(tempfile.mkdtemp(prefix="gang-t-"))
        local = LocalCluster(home)
        if key_users:
            keygen(local.keys, list(key_users))
        config_file = shape.pop("config_file", None)
        given = {"quantum_ms": 100, "heartbeat_ms": 100, "node_kill_grace_s": 1.0, "http_bind": "", **shape}
        # a configuration file's partitions' own quanta win over the cluster's
        config = ClusterConfig(**given) if config_file is None else ClusterConfig.from_file(Path(config_file), **given)
        # job ids start at 1 in every cluster: each has a spool of its own for other users' outputs
        user_spool = Path(tempfile.mkdtemp(prefix="users-", dir=os.environ["GANG_NODE_USER_SPOOL_DIR"]))
        user_spool.chmod(0o711)
        with pytest.MonkeyPatch.context() as patch:
            patch.setenv("GANG_NODE_USER_SPOOL_DIR", str(user_spool))
            state = local.up(config)
        cluster = Cluster(local, local.client(state), user_spool)
        started.append(cluster)
        return cluster

    groups_before = memory_groups()
    yield start
    for cluster in started:
        cluster.client.close()
        cluster.local.down()
        left = task_processes(cluster.home)
        run = progress_folder(cluster.home)
        shutil.rmtree(cluster.home, ignore_errors=True)
        assert not left, f"tasks left behind: {[p.pid for p in left]}"
        assert run == cluster.home or not run.exists(), f"the tasks' folder on the tmpfs left behind: {run}"
    # a deadline, not a timing: after a flood (bench/hostile_load.py) the kernel may take seconds to free them
    wait_until(lambda: memory_groups() <= groups_before, 30, "the node daemons' memory cgroups to go")


@pytest.fixture
def gang(start_cluster: Callable[..., Cluster], monkeypatch: pytest.MonkeyPatch) -> Callable[..., Any]:
    """`gang ARGS` as a user's shell runs it, against a 2-node FCFS cluster (a second wide job waits)."""
    cluster = start_cluster(nodes=2, policy="fcfs")
    monkeypatch.setenv("GANG_MASTER", cluster.client.endpoint)
    monkeypatch.setenv("COLUMNS", "80")

    def run(*args: str, cwd: Path | None = None) -> "subprocess.CompletedProcess[str]":
        return subprocess.run([sys.executable, "-m", "gangsched.cli", *args], capture_output=True, text=True,
                              cwd=cwd)

    run.client = cluster.client  # type: ignore[attr-defined]
    return run


_DATABASES = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_installed(debian) -> None:
    """Debian's postgresql, installed where it is missing."""
    if postgres_tools() is None:
        debian.install("postgresql")
    assert postgres_tools() is not None, "Debian's postgresql brought no initdb"


@pytest.fixture(scope="session")
def postgres(postgres_installed) -> Iterator[PostgresServer]:
    # not below pytest's folder, which is root's alone: the server's account enters this one
    with tempfile.TemporaryDirectory(prefix="gang-postgres-") as folder, running(Path(folder)) as server:
        yield server


@pytest.fixture
def database(postgres) -> Iterator[str]:
    """A database of this test's own on the server: its URL."""
    name = f"test_{next(_DATABASES)}"
    import psycopg  # the tests on PostgreSQL alone need it

    with psycopg.connect(postgres.url, autocommit=True) as admin:
        admin.execute(f"CREATE DATABASE {name}")
    yield postgres.url.replace("/postgres?", f"/{name}?")
    with psycopg.connect(postgres.url, autocommit=True) as admin:
        admin.execute(f"DROP DATABASE {name} WITH (FORCE)")


@pytest.fixture
def slurm(tmp_path: Path) -> Path:
    """A folder of Slurm's command names, as `gang slurm install` writes them."""
    return install_slurm_commands(tmp_path / "bin")
