"""The embedded default: a master, N node daemons and an I/O server as local processes.

Everything lives under one folder (``GANG_HOME``, default ``~/.gangsched``):
``cluster.json`` names the processes and the master's endpoint, ``logs/``
holds each daemon's log (``NAME.log``, rotated; a crash before the log
starts in ``NAME.stderr``), ``nodes/NAME/`` each node's task outputs,
``checkpoints/`` the state of migrating tasks (a folder every node shares), ``run``
a link to the folder on a tmpfs where the tasks keep their progress files. The
sockets are ipc files there, in a folder only its owner may enter, so this
cluster needs no authentication and runs every task as the user who started
it. With ``keys`` the master listens on loopback TCP with CURVE keys made in
``keys/``: then other accounts of the machine submit with keys of theirs, and
a cluster started as root runs their jobs as them. The nodes split the
machine's cores between them, each pinning its tasks to its own: utilization
is measured against each node's share.
"""

import contextlib
import getpass
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path

import psutil

from gangsched.client.master_client import MasterClient, MasterUnreachable
from gangsched.daemon.curve import keygen
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.home import KEYS, LOCAL_STATE, default_home
from gangsched.deploy.postgres_server import PostgresServer, postgres_tools
from gangsched.master.published import ENDPOINTS_FILE, BoundEndpoints, bound_endpoints
from gangsched.noded.memory import host_memory
from gangsched.policy.cores import even_share
from gangsched.protocol.sizes import format_size

_IPC_PATH_MAX = 100  # sun_path holds 108 bytes, "ipc://" aside
# each node's ports for its jobs' MASTER_PORT (the nodes share this machine's ports)
_PORTS_FROM = 24000
_PORTS_PER_NODE = 100
_STOP_GRACE_S = 10.0
_RUN_LINK = "run"  # the home's link to its folder on a tmpfs (``progress_folder``)
_TMPFS = Path("/dev/shm")


class ClusterError(Exception):
    pass


@dataclass
class ClusterState:
    master: str
    pids: dict[str, int]  # daemon name -> pid
    started: dict[str, int]  # daemon name -> its start in clock ticks since boot, against recycled pids
    commands: dict[str, list[str]]  # daemon name -> its `gang` arguments
    config: ClusterConfig
    prefixes: dict[str, list[str]] = field(default_factory=dict)  # daemon name -> the command it runs under


@dataclass(frozen=True)
class Confinement:
    """Where the first master runs: under a command (``ip netns exec NAME``: a network namespace of its
    own, bench/isolation.py), bound on an address there, over TCP with keys."""

    prefix: list[str]
    host: str


class LocalCluster:
    def __init__(self, home: Path | None = None) -> None:
        self.home = Path(home or default_home()).resolve()
        self._state_file = self.home / LOCAL_STATE
        self.keys = self.home / KEYS  # CURVE keys of a cluster started with keys

    def state(self) -> ClusterState | None:
        if not self._state_file.exists():
            return None
        raw = json.loads(self._state_file.read_text())
        return ClusterState(
            raw["master"], raw["pids"], raw["started"], raw["commands"], ClusterConfig(**raw["config"]),
            raw.get("prefixes", {}),
        )

    def up(self, config: ClusterConfig, timeout_s: float = 30.0, confined: Confinement | None = None) -> ClusterState:
        """``confined``: where the first master runs, if not beside the others (its sockets over TCP, so
        with ``keys``)."""
        if confined is not None and not config.keys:
            raise ClusterError("a master confined elsewhere is reached over TCP: the cluster needs keys")
        if self.state() is not None and self.alive():
            raise ClusterError(f"a cluster already runs from {self.home}: `gang cluster down` first")
        # the sockets in here are the only gate on who may submit and cancel
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        self.home.chmod(0o700)
        (self.home / "logs").mkdir(exist_ok=True)
        if config.keys:
            keygen(self.keys, [getpass.getuser()])  # adds to keys made before, replaces none
            # any free port, as the master binds it; kept for its restarts (``restart``)
            bind, switch, report = "tcp://127.0.0.1:*", "tcp://127.0.0.1:*", "tcp://127.0.0.1:*"
            with_keys = ["--keys", str(self.keys)]
        else:
            bind, switch, report = self._ipc("master.sock"), self._ipc("switch.sock"), self._ipc("report.sock")
            with_keys = []
        if config.masters > 1 and not config.store:  # the masters' shared store: a server of the cluster's own
            config = config.replace(store=self._start_postgres())
        if config.masters > 1 and not config.store.startswith("postgres"):
            raise ClusterError(f"{config.masters} masters share a store in PostgreSQL: give --store postgresql://...")
        # the tasks' folder on a tmpfs, which every account may pass through: every user's jobs reach the I/O
        # server's socket there (a write carries its job's token, made with the key only the daemons read)
        run = self._new_run_folder()
        io_addr = f"ipc://{run}/io.sock" if run is not None else self._ipc("io.sock")
        io_key = self.home / "io.key"
        if not io_key.exists():
            io_key.touch(mode=0o600)
            io_key.write_bytes(os.urandom(32))
        commands = {"ioserver": ["ioserver", "--bind", io_addr, "--key", str(io_key), *config.arguments("io")]}
        masters = [_master_name(number) for number in range(1, config.masters + 1)]
        prefixes = {} if confined is None else {"master": confined.prefix}
        for name in masters:
            arguments = config.arguments("master")
            http = arguments.index("--http-bind") + 1 if "--http-bind" in arguments else 0
            if name != "master" and http and arguments[http]:  # the first's port is taken: any free one
                arguments[http] = arguments[http].rpartition(":")[0] + ":0"
            if not config.keys:
                bind, switch, report = (self._ipc(f"{name}{kind}.sock") for kind in ("", "-switch", "-report")) \
                    if name != "master" else (bind, switch, report)
            elif name in prefixes:
                bind = switch = report = f"tcp://{confined.host}:*"  # type: ignore[union-attr]
            else:
                bind = switch = report = "tcp://127.0.0.1:*"
            commands[name] = [
                "master", "--bind", bind, "--switch-bind", switch, "--report-bind", report, *with_keys,
                "--state-dir", str(self.home / name), "--io-addr", io_addr, "--io-key", str(io_key),
                "--checkpoint-dir", str(self.home / "checkpoints"), *arguments,
                *(["--config", config.config_file] if config.config_file else []),
            ]
            (self.home / name / ENDPOINTS_FILE).unlink(missing_ok=True)  # an earlier run's
        pids: dict[str, int] = {}
        started: dict[str, int] = {}
        try:  # nothing left running if this fails half-way, or a signal ends the command meanwhile
            for name in commands:  # the first master leads: the others start once it has bound its sockets
                self._spawn(name, commands[name], prefixes.get(name, []), pids)
                started[name] = _start_ticks(pids[name])
                if name in masters:
                    bound = self._bound_endpoints(name, pids, started, timeout_s)
                    # a restart binds the same: clients, nodes and watchers know these
                    for flag, endpoint in (("--bind", bound.client), ("--switch-bind", bound.switch),
                                           ("--report-bind", bound.report)):
                        commands[name][commands[name].index(flag) + 1] = endpoint
            master = ",".join(commands[name][commands[name].index("--bind") + 1] for name in masters)
            cores = os.cpu_count() or 1
            share = cores / config.nodes  # the CPU utilization is measured against
            for index, node in enumerate(config.planned_nodes(host_memory()), start=1):
                name = node.name
                commands[name] = [
                    "noded", "--master", master, "--name", name, "--cpu-share", f"{share:.4f}",
                    "--cpu-list", ",".join(map(str, even_share(index - 1, config.nodes, range(cores)))),
                    "--processors", str(node.processors), "--memory", format_size(node.memory),
                    "--peer-ports", f"{_PORTS_FROM + _PORTS_PER_NODE * (index - 1)}-"
                                    f"{_PORTS_FROM + _PORTS_PER_NODE * index - 1}",
                    "--spool-dir", str(self.home / "nodes" / name), "--peer-transport", "ipc",
                    *(["--run-dir", str(run / name)] if run is not None else []),
                    *with_keys, *config.arguments("node"),
                ]
            for name in (name for name in commands if name not in pids):
                self._spawn(name, commands[name], [], pids)
                started[name] = _start_ticks(pids[name])
            state = ClusterState(master, pids, started, commands, config, prefixes)
            self._state_file.write_text(json.dumps(asdict(state), indent=2))
        except BaseException:
            for name in _nodes_first(pids):
                _stop(pids[name], started[name] if name in started else _start_ticks(pids[name]))
            self._remove_run_folder()
            raise
        self._wait_for_nodes(state, timeout_s)
        return state

    def down(self) -> list[str]:
        """Stop the nodes first (they end their tasks), then the master and I/O server."""
        state = self.state()
        if state is None:
            self._remove_run_folder()  # an `up` that failed half-way may have made it
            return []
        stopped = [name for name in _nodes_first(state.pids) if _stop(state.pids[name], state.started[name])]
        tools = postgres_tools()
        if tools is not None and (self._postgres().folder / "data" / "postmaster.pid").exists():
            self._postgres().stop(tools)
            stopped.append("postgres")
        self._remove_run_folder()
        self._state_file.unlink(missing_ok=True)
        return stopped

    def _new_run_folder(self) -> Path | None:
        """A folder on a tmpfs for the tasks' progress files, each made and removed with its task: on the
        disk's file system that was half of the node daemons' kernel time in a flood of short jobs
        (docs/limits.md). Made anew (mkdtemp: no other account can have put it there first), passable
        by every user (0711) as another user's task gets a folder of its own in it; the home links to it
        (``progress_folder``). None where there is no tmpfs to write to: the progress files stay in the
        spools."""
        self._remove_run_folder()  # a cluster that ended without `down`
        if not os.access(_TMPFS, os.W_OK | os.X_OK):
            return None
        folder = Path(tempfile.mkdtemp(prefix="gang-run-", dir=_TMPFS))
        folder.chmod(0o711)
        link = self.home / _RUN_LINK
        link.unlink(missing_ok=True)
        link.symlink_to(folder)
        return folder

    def _remove_run_folder(self) -> None:
        """The tmpfs folder goes; its link stays, so that ``progress_folder`` still finds what it held."""
        link = self.home / _RUN_LINK
        if link.is_symlink():
            shutil.rmtree(link.resolve(), ignore_errors=True)

    def _postgres(self) -> PostgresServer:
        """The PostgreSQL server of a cluster of several masters that named no store: in GANG_HOME, or, for
        root, whose server runs as an unprivileged account that may not enter GANG_HOME (0700, the gate on
        its sockets), in a folder of /var/tmp named after it."""
        if os.geteuid() != 0:
            return PostgresServer(self.home / "postgres")
        named = hashlib.sha256(str(self.home).encode()).hexdigest()[:12]
        return PostgresServer(Path("/var/tmp") / f"gangsched-postgres-{named}" / "server")

    def _start_postgres(self) -> str:
        tools = postgres_tools()
        if tools is None:
            raise ClusterError("masters that share a store need PostgreSQL: apt-get install postgresql, or give "
                               "--store postgresql://...")
        server = self._postgres()
        if server.folder.parent != self.home:
            server.folder.parent.mkdir(mode=0o755, exist_ok=True)
        server.start(tools)
        return server.url

    def restart(self, daemon: str, crash: bool = False) -> None:
        """Stop one daemon (SIGKILL if ``crash``) and start it again with the same arguments."""
        state = self.state()
        if state is None or daemon not in state.pids:
            raise ClusterError(f"no daemon {daemon!r} in the cluster at {self.home}")
        pid, started = state.pids[daemon], state.started[daemon]
        if crash and _is_ours(pid, started):
            psutil.Process(pid).kill()
            psutil.Process(pid).wait(_STOP_GRACE_S)
        else:
            _stop(pid, started)
        self._spawn(daemon, state.commands[daemon], state.prefixes.get(daemon, []), state.pids)
        state.started[daemon] = _start_ticks(state.pids[daemon])
        self._state_file.write_text(json.dumps(asdict(state), indent=2))

    def alive(self) -> dict[str, bool]:
        state = self.state()
        if state is None:
            return {}
        return {name: _is_ours(pid, state.started[name]) for name, pid in state.pids.items()}

    def masters(self) -> dict[str, BoundEndpoints]:
        """Each master's endpoints as it bound them, by its daemon name (master, master2, ...)."""
        state = self.state()
        names = [] if state is None else [name for name in state.pids if name.startswith("master")]
        return {name: bound for name in names for bound in [bound_endpoints(self.home / name)] if bound is not None}

    def log_path(self, daemon: str) -> Path:
        return self.home / "logs" / f"{daemon}.log"

    def client(self, state: ClusterState, timeout_s: float = 5.0) -> MasterClient:
        """A client of this cluster's master; with the starting user's key where it has keys."""
        return MasterClient(state.master, timeout_s=timeout_s, keys=self.keys if state.config.keys else None)

    def _ipc(self, name: str) -> str:
        path = self.home / name
        if len(str(path)) > _IPC_PATH_MAX:
            raise ClusterError(f"{path} is too long for a socket path: use a shorter GANG_HOME")
        return f"ipc://{path}"

    def _spawn(self, daemon: str, arguments: list[str], prefix: list[str], pids: dict[str, int]) -> None:
        """Start ``daemon``, its pid in ``pids`` as soon as there is one."""
        # the daemon writes (and rotates) its own log; what it prints outside the log (a crash
        # before logging starts) goes to a file of its own, which rotation does not rename
        before = {child.pid for child in psutil.Process().children()}
        try:
            with open(self.home / "logs" / f"{daemon}.stderr", "ab") as printed:
                pids[daemon] = subprocess.Popen(
                    [*prefix, sys.executable, "-m", "gangsched.cli", *arguments, "--log-file",
                     str(self.log_path(daemon))],
                    stdin=subprocess.DEVNULL, stdout=printed, stderr=subprocess.STDOUT,
                    start_new_session=True,  # outlives the CLI, untouched by its terminal's ^C
                ).pid
        except BaseException:
            # a signal that ends the command while Popen waits for the child's exec: the child runs on, its
            # pid never returned to be stopped (one start in eight of a test that sends it). Once in ``pids``
            # (a store the interpreter runs no signal handler before), the caller stops it
            for child in psutil.Process().children():
                if child.pid not in before and child.pid not in pids.values():
                    with contextlib.suppress(psutil.Error):
                        child.kill()
            raise

    def _bound_endpoints(self, master: str, pids: dict[str, int], started: dict[str, int],
                         timeout_s: float) -> BoundEndpoints:
        """The endpoints the master bound, once it says (master/published.py); the daemons started so far
        are stopped if it never does."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            bound = bound_endpoints(self.home / master)
            if bound is not None:
                return bound
            if not _is_ours(pids[master], started[master]):
                break
            time.sleep(0.02)
        for name, pid in pids.items():
            _stop(pid, started[name])
        raise ClusterError(f"the master did not bind its sockets: see {self.home}/logs/")

    def _wait_for_nodes(self, state: ClusterState, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with self.client(state, timeout_s=1.0) as client:
            while time.monotonic() < deadline:
                dead = [name for name, alive in self.alive().items() if not alive]
                if dead:
                    self.down()
                    raise ClusterError(f"{', '.join(dead)} exited at start: see {self.home}/logs/")
                try:
                    if sum(node.state == "up" for node in client.nodes()) == state.config.nodes:
                        return
                except MasterUnreachable:
                    pass
                time.sleep(0.1)
        self.down()
        raise ClusterError(f"the nodes did not register within {timeout_s:g} s: see {self.home}/logs/")


def _master_name(number: int) -> str:
    """The daemon name of the cluster's ``number``th master: master, master2, ..."""
    return "master" if number == 1 else f"master{number}"


@contextmanager
def temporary_local_cluster(config: ClusterConfig, confined: Confinement | None = None) -> Iterator[LocalCluster]:
    """A fresh local cluster, up, in a folder of its own, gone with everything in it afterwards."""
    home = Path(tempfile.mkdtemp(prefix="gang-"))
    cluster = LocalCluster(home)
    try:
        cluster.up(config, confined=confined)
        yield cluster
    finally:
        cluster.down()
        shutil.rmtree(home, ignore_errors=True)


@contextmanager
def temporary_cluster(config: ClusterConfig) -> Iterator[MasterClient]:
    """A client of a fresh local cluster (see ``temporary_local_cluster``)."""
    with temporary_local_cluster(config) as cluster:
        state = cluster.state()
        assert state is not None
        with cluster.client(state) as client:
            yield client


def progress_folder(home: Path) -> Path:
    """The folder below which the tasks of the cluster in ``home`` have their progress files: its folder on
    a tmpfs, where `up` made one (the home's ``run`` link, kept after `down`), else the home (the spools)."""
    link = home / _RUN_LINK
    return link.resolve() if link.is_symlink() else home


def task_processes(home: Path, job_id: int | None = None) -> list[psutil.Process]:
    """The live task processes of the cluster in ``home`` (of one job, if given), stopped or not: every
    task's environment names its progress file, below ``progress_folder`` or, for a node given no run
    folder of the cluster's, below the home."""
    found = []
    below = (f"{progress_folder(home)}/", f"{home}/")
    for process in psutil.process_iter():
        try:
            env = process.environ()
            if not env.get("GANG_PROGRESS_FILE", "").startswith(below):
                continue
            if job_id is None or env.get("GANG_JOB_ID") == str(job_id):
                if process.status() != psutil.STATUS_ZOMBIE:
                    found.append(process)
        except psutil.Error:
            continue
    return found


def _start_ticks(pid: int) -> int:
    """When ``pid`` started, in clock ticks since boot: its identity against a recycled pid. Not psutil's
    create_time, which adds the boot time as the wall clock now puts it, so a clock stepped by a second
    (a virtual machine's clock synced) makes every daemon of a cluster look like another process."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            fields = stat.read().rsplit(b")", 1)[1].split()
    except OSError:
        return -1
    return int(fields[19])  # field 22 of proc(5); the fields after the command's name start at field 3


def _is_ours(pid: int, started: int) -> bool:
    """True if ``pid`` is still the daemon started then (not a recycled pid)."""
    try:
        return _start_ticks(pid) == started and psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.Error:
        return False


def _nodes_first(names: Iterable[str]) -> list[str]:
    """The daemons in the order they are stopped: the nodes first (they end their tasks), then the masters
    and the I/O server."""
    return sorted(names, key=lambda name: name.startswith("master") or name == "ioserver")


def _stop(pid: int, started: int) -> bool:
    if not _is_ours(pid, started):
        return False
    process = psutil.Process(pid)
    process.send_signal(signal.SIGTERM)
    try:
        process.wait(_STOP_GRACE_S)
    except psutil.TimeoutExpired:
        process.kill()
        process.wait(_STOP_GRACE_S)
    return True
