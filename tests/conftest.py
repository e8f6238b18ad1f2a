"""Fixtures that start real local clusters, helpers to wait on and inspect them, and the fake clock
the daemons' cores are driven on."""

import _posixsubprocess  # type: ignore[import-not-found]
import contextlib
import inspect
import itertools
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psutil
import pytest

from gangsched.client.master_client import MasterClient
from gangsched.daemon.curve import keygen
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import LocalCluster, progress_folder, task_processes
from gangsched.deploy.postgres_server import PostgresServer, postgres_tools, running
from gangsched.deploy.unix_accounts import remove_unix_account
from gangsched.deploy.unix_accounts import unix_account as deploy_unix_account
from gangsched.master.clock import Now
from gangsched.master.core import MasterCore
from gangsched.master.job_record import raise_illegal_transitions
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.noded.cgroups import cgroup_of
from gangsched.protocol.messages import ExitAck, TaskExit
from gangsched.protocol.records import JobInfo

raise_illegal_transitions()  # a transition a job's life does not have fails the test that makes it

_made_accounts: list[str] = []


class FakeClock:
    """The clocks a test sets by hand: the monotonic one and Unix time read the same."""

    def __init__(self, now: float = 1000.0) -> None:
        self.now = now

    def read(self) -> Now:
        return Now.at(round(self.now * 1e9), self.now)


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


class OnClock:
    """A part of a core whose events are each given the fake clock's reading at the call, as the
    daemon's loop gives the real one's, and are each a turn of the loop: the event, the turn's scheduling
    pass, and a commit of the store (one that fails leaves the writes pending, for the next)."""

    def __init__(self, part: object, clock: FakeClock, store: JobStore, core: MasterCore) -> None:
        self._part, self._clock, self._store, self._core = part, clock, store, core

    def __getattr__(self, name: str) -> Any:
        attribute = getattr(self._part, name)
        if not callable(attribute):
            return attribute
        on_clock = "now" in inspect.signature(attribute).parameters

        def event(*args: Any, **kwargs: Any) -> Any:
            now = self._clock.read()
            result = attribute(*args, now=now, **kwargs) if on_clock else attribute(*args, **kwargs)
            self._core.scheduling_pass(now)
            with contextlib.suppress(StoreWriteError):
                self._store.commit()
            return result

        return event


class DrivenMaster:
    """A ``MasterCore`` driven on a fake clock: its events read the clock as the master's loop does."""

    def __init__(self, core: MasterCore, clock: FakeClock, store: JobStore) -> None:
        self.core, self.clock, self.store = core, clock, store
        self.node_events = OnClock(core.node_events, clock, store, core)
        self.clients = OnClock(core.client_requests, clock, store, core)
        self.users = OnClock(core.users, clock, store, core)

    def task_ended(self, message: TaskExit) -> ExitAck:
        """A task's end as the master's loop takes it from a drain of the report socket: a turn of its own."""
        acknowledged: ExitAck = self.node_events.ended(message)
        return acknowledged

    def tick(self) -> Any:
        """A quantum boundary and the switch it sends."""
        self.core.tick(self.clock.read())
        switch = self.core.switch(self.clock.read().monotonic_ns)
        with contextlib.suppress(StoreWriteError):
            self.store.commit()
        return switch

    def __getattr__(self, name: str) -> Any:
        return getattr(self.core, name)


def driven_master(settings: Any, endpoints: Any, store: Any, clock: FakeClock, partitions: Any = None) -> DrivenMaster:
    return DrivenMaster(MasterCore(settings, endpoints, store, clock.read(), partitions), clock, store)


@pytest.fixture
def alice_and_bob() -> None:
    """Two accounts the master's host knows (made where the tests run as root)."""
    if None in [unix_account(name) for name in ("alice", "bob")]:
        pytest.skip("the accounts alice and bob are made only where the tests run as root")


def unix_account(name: str) -> pwd.struct_passwd | None:
    """The account ``name``, made (no home, /bin/sh) where the tests run as root; None elsewhere.

    Accounts made here are removed when the session ends (see ``_test_machine_state``)."""
    found = deploy_unix_account(name)
    if found is None:
        return None
    account, made = found
    if made:
        _made_accounts.append(name)
    return account


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
    for name in _made_accounts:
        remove_unix_account(name)


class ProcessInFastTier(Exception):
    """A test of the fast tier started a process: it belongs to a tier that may (a mark of PROCESS_TIERS)."""


PROCESS_TIERS = ("live", "docker", "mpi")
# every way Python starts a process: subprocess and asyncio's through _fork_exec, multiprocessing's
# spawn through _posixsubprocess, its fork, pty and os.system
_PROCESS_STARTS = [(subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec"), (os, "fork"), (os, "forkpty"),
                   (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system")]


@pytest.fixture(autouse=True)
def _fast_tier_starts_no_process(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fast tier starts no process (docs/architecture.md, "Tests in tiers"): a test that does fails, with
    the reason, unless marked for a tier that may."""
    if any(request.node.get_closest_marker(tier) for tier in PROCESS_TIERS):
        return

    def refused(*args: object, **kwargs: object) -> None:
        raise ProcessInFastTier(f"{request.node.nodeid} starts a process: mark it {' or '.join(PROCESS_TIERS)}")

    for module, name in _PROCESS_STARTS:
        monkeypatch.setattr(module, name, refused)


class DebianPackages:
    """What the tests need from Debian (chromium, prometheus, Slurm's PMI-2 library), installed where
    missing: the tests run as root in CI and install what they need, with one package-list update a
    session."""

    def __init__(self) -> None:
        self._updated = False

    def install(self, package: str) -> None:
        if not self._updated:
            subprocess.run(["apt-get", "update", "-qq"], check=True)
            self._updated = True
        subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True, capture_output=True,
                       env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})

    def tool(self, command: str, package: str) -> str:
        """The path of ``command``, installing ``package`` first where it is missing."""
        found = shutil.which(command)
        if found is None:
            self.install(package)
            found = shutil.which(command)
        assert found is not None, f"{package} did not bring {command}"
        return found


@pytest.fixture(scope="session")
def debian() -> DebianPackages:
    return DebianPackages()


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def ended(cluster: "Cluster", job_id: int, timeout_s: float = 60) -> JobInfo:
    """The job's info once it reached a final state."""
    found = wait_until(lambda: next((info for info in cluster.client.jobs([job_id]) if info.state.is_final), None),
                       timeout_s, f"job {job_id} to end")
    assert isinstance(found, JobInfo)
    return found


def task_output(cluster: "Cluster", job_id: int, node: str, rank: int) -> str:
    """What a task of a local cluster wrote to its output file, so far."""
    path = cluster.home / "nodes" / node / f"job-{job_id}.{rank}.out"
    return path.read_text() if path.exists() else ""


class Cluster:
    def __init__(self, local: LocalCluster, client: MasterClient, user_spool: Path) -> None:
        self.local, self.client, self.home = local, client, local.home
        self.user_spool = user_spool  # other users' outputs: NODE/USER/job-J.R.out


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
    wait_until(lambda: memory_groups() <= groups_before, 5, "the node daemons' memory cgroups to go")


def memory_groups() -> set[Path]:
    """The node daemons' cgroup v1 memory folders below this process's memory group, where it has one."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return set((Path("/sys/fs/cgroup/memory") / path.lstrip("/")).glob("gangsched-*"))
    return set()


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


def is_held(process: psutil.Process) -> bool:
    """Whether a task's process is held descheduled: stopped, or frozen in its cgroup (noded/holding.py:
    a process frozen before its stop signal took effect sleeps, frozen, until thawed)."""
    return process.status() == psutil.STATUS_STOPPED or cgroup_frozen(process.pid)


def cgroup_frozen(pid: int) -> bool:
    """Whether the process's cgroup v2 group says it is frozen."""
    group = cgroup_of(str(pid))
    if group is None:
        return False
    try:
        return "frozen 1" in (group / "cgroup.events").read_text().splitlines()
    except OSError:
        return False


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
