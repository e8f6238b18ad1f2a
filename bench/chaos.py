"""A chaos run: a steady mix of jobs while daemons are killed and stopped and the store fills.

On a fresh local cluster, one thread submits a seeded mix (synthetic programs, shell
commands, MPI jobs, arrays, dependencies, jobs of a second Unix account, tasks that
resume themselves with a timer and jobs that send SIGCONT to other jobs' tasks),
another watches every task's cgroup (bench/chaos_watch.py), and the run injects one fault at a time, in a
seeded order: a node daemon or the master killed with SIGKILL and started again, or
stopped with SIGSTOP and continued, or the master's state file system (a tmpfs the
run mounts) filled and freed. Faults come one after another, so the master is never
killed while its file system is full: a master that restarts on a full disk is not
tried (docs/limits.md). With standby masters (``--masters 2``, on a PostgreSQL server of
the run's own) the master faults strike the leader, and a takeover on purpose joins them;
the store is not filled. Where the run is root's, the first master runs in a network namespace
of its own (bench/isolation.py, over TCP with keys) and its link is cut and mended, whether it
leads or stands by.

Afterwards it checks what docs/architecture.md promises ("A failing store",
"Descheduled means not running"): every accepted job ended with a reason, none lost
or started twice, no process of any job left, no frozen task ran, dependents and
accounts agree with the jobs' ends.
"""

import contextlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from gangsched.bench.chaos_checks import Invariants, check
from gangsched.bench.chaos_mix import ChaosMix
from gangsched.bench.chaos_watch import SlotFindings, SlotWatch
from gangsched.bench.isolation import Namespace, shared_store
from gangsched.client.connection import MasterUnreachable
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import LocalCluster, task_processes
from gangsched.noded.process_managers.shared_memory import SHM
from gangsched.protocol.records import JobInfo, UserInfo

FAULTS = ("node_kill", "node_stop", "master_kill", "master_stop", "master_cut", "store_full", "takeover")
_STORE_SIZE = "64m"
_STALL_S = 120.0  # after the faults, the jobs are waited for while some end at least this often


@dataclass
class ChaosResult:
    seed: int
    seconds: float = 0.0
    submitted: Counter[str] = field(default_factory=Counter)  # accepted jobs of each kind
    refused: Counter[str] = field(default_factory=Counter)  # submissions refused or never answered, by why
    faults: Counter[str] = field(default_factory=Counter)
    recoveries: Counter[str] = field(default_factory=Counter)  # faults after which every daemon served again
    slots: SlotFindings = field(default_factory=SlotFindings)  # what the look at the cgroups found
    escapes_stopped: int = 0  # tasks the nodes found running while descheduled (by process tree) and stopped
    invariants: Invariants = field(default_factory=Invariants)
    kept_logs: Path | None = None  # where the daemons' logs were kept, as an invariant broke

    def violations(self) -> list[str]:
        found = self.invariants.violations()
        for name in ("ran_while_frozen", "outside_slot"):
            items = getattr(self.slots, name)
            if items:
                found.append(f"{name.replace('_', ' ')}: {len(items)}, e.g. {', '.join(items[:5])}")
        return found


class ChaosRun:
    def __init__(self, config: ClusterConfig, minutes: float, seed: int, mpi: bool) -> None:
        self._config, self._seconds, self._mpi = config, minutes * 60, mpi
        self._random = random.Random(seed)
        self._namespace: Namespace | None = None  # the first master's, whose link is cut
        self.result = ChaosResult(seed)

    def run(self) -> ChaosResult:
        with tempfile.TemporaryDirectory(prefix="gang-chaos-store-") as folder, contextlib.ExitStack() as stack:
            if self._config.masters > 1:
                self._config, self._namespace = stack.enter_context(
                    shared_store(self._config, Path(folder), cut=os.geteuid() == 0))
            return self._run()

    def _run(self) -> ChaosResult:
        home = Path(tempfile.mkdtemp(prefix="gang-chaos-"))
        store = home / "master"
        store.mkdir()
        mounted = self._config.masters == 1 and os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={_STORE_SIZE},mode=0700", "tmpfs", str(store)]).returncode == 0
        # the second account's outputs go to a folder of the run's, gone with the account afterwards
        users_spool = Path(tempfile.mkdtemp(prefix="gang-chaos-users-"))
        users_spool.chmod(0o711)  # the account's own folder below it is 0700; it passes through
        config = self._config.replace(node_user_spool_dir=str(users_spool))
        cluster = LocalCluster(home)
        shared_before = set(os.listdir(SHM))  # what a job's ranks leave there is its node daemon's to remove
        mix = ChaosMix("", home, self._random.randrange(2**32), self._config.nodes, self._mpi)
        jobs: dict[int, JobInfo] = {}
        users: list[UserInfo] = []
        namespace = self._namespace
        try:
            state = cluster.up(config, confined=None if namespace is None else namespace.confinement())
            mix.master, mix.keys = state.master, cluster.keys if config.keys else None
            jobs, users = self._chaos(cluster, mix, store if mounted else None)
        finally:
            cluster.down()
            # what no daemon ended is the run's finding, then ended here: nothing is left behind
            left = task_processes(home)
            left_files = sorted(set(os.listdir(SHM)) - shared_before)
            self.result.invariants = check(mix.accepted, jobs, users, [_named(process) for process in left],
                                           left_files, home)
            for process in left:
                process.kill()
            self.result.escapes_stopped = sum(log.read_text(errors="replace").count("ran while descheduled")
                                              for log in (home / "logs").glob("node*.log*"))
            if mounted:
                subprocess.run(["umount", "-l", str(store)], check=False)
            if self.result.violations():  # what the daemons said of it: the cluster's folder goes
                self.result.kept_logs = Path(tempfile.mkdtemp(prefix="gang-chaos-logs-"))
                shutil.copytree(home / "logs", self.result.kept_logs, dirs_exist_ok=True)
            shutil.rmtree(home, ignore_errors=True)
            shutil.rmtree(users_spool, ignore_errors=True)
            mix.close()
        self.result.submitted = Counter(accepted.kind for accepted in mix.accepted.values())
        self.result.refused = mix.refused
        return self.result

    def _chaos(self, cluster: LocalCluster, mix: ChaosMix,
               store: Path | None) -> tuple[dict[int, JobInfo], list[UserInfo]]:
        config = self._config
        # rows a quantum may run together: one under strict gang scheduling, two paired, any under local
        rows = None if config.coordination == "local" else 2 if "paired" in (config.pairing, config.policy) else 1
        watch = SlotWatch(cluster.home, None if rows is None else rows * config.processors_per_node)
        watch.start()
        start = time.monotonic()
        mix.start()
        faults = [fault for fault in FAULTS if (fault != "store_full" or store is not None)
                  and (fault != "takeover" or config.masters > 1) and (fault != "master_cut" or self._namespace)]
        try:
            while time.monotonic() - start < self._seconds:
                time.sleep(self._random.uniform(2.0, 6.0))
                fault = self._random.choice(faults)
                self.result.faults[fault] += 1
                self._inject(cluster, fault, store)
        finally:
            mix.stop()
        state = cluster.state()
        assert state is not None
        with cluster.client(state, timeout_s=10.0) as client:
            found = mix.drain(client, _STALL_S)
        watch.stopping.set()
        watch.join()
        self.result.slots = watch.findings
        self.result.seconds = time.monotonic() - start
        return found

    def _inject(self, cluster: LocalCluster, fault: str, store: Path | None) -> None:
        state = cluster.state()
        assert state is not None
        node = self._random.choice([name for name in state.pids if name.startswith("node")])
        held = self._random.uniform(0.5, 4.0)
        if fault == "node_kill":
            cluster.restart(node, crash=True)
        elif fault == "master_kill":
            cluster.restart(_leader(cluster), crash=True)
        elif fault == "takeover":
            with cluster.client(state, timeout_s=5.0) as client:
                client.takeover()
        elif fault in ("node_stop", "master_stop"):
            daemon = psutil.Process(state.pids[node if fault == "node_stop" else _leader(cluster)])
            daemon.send_signal(signal.SIGSTOP)
            time.sleep(held)
            daemon.send_signal(signal.SIGCONT)
        elif fault == "master_cut":  # the first master's link, whether it leads or stands by
            assert self._namespace is not None
            self._namespace.link(up=False)
            time.sleep(held)
            self._namespace.link(up=True)
        else:
            assert store is not None
            fill_filesystem(store / "filler")
            time.sleep(held)
            (store / "filler").unlink()
        self._recovered(cluster, fault, node)

    def _recovered(self, cluster: LocalCluster, fault: str, node: str) -> None:
        """The master answers and every node is up again (a stopped or killed one registers anew)."""
        state = cluster.state()
        assert state is not None
        deadline = time.monotonic() + 60.0
        with cluster.client(state, timeout_s=1.0) as client:
            while time.monotonic() < deadline:
                try:
                    if sum(info.state == "up" for info in client.nodes()) == self._config.nodes:
                        self.result.recoveries[fault] += 1
                        return
                except MasterUnreachable:
                    pass
                time.sleep(0.1)
        print(f"after {fault} ({node}), the cluster did not recover within 60 s", file=sys.stderr)


def _leader(cluster: LocalCluster) -> str:
    """The daemon name of the master that leads (the one master, where there is one)."""
    state = cluster.state()
    assert state is not None
    if state.config.masters == 1:
        return "master"
    names = {bound.client: name for name, bound in cluster.masters().items()}
    deadline = time.monotonic() + 60.0
    with cluster.client(state, timeout_s=2.0) as client:
        while time.monotonic() < deadline:
            leader = client.leader()
            if leader is not None and leader.endpoint in names:
                return names[leader.endpoint]
            time.sleep(0.1)
    raise TimeoutError("no master led within 60 s")


def fill_filesystem(path: Path) -> None:
    """Write zeros to ``path`` until its file system is full."""
    block = bytes(1 << 20)
    with open(path, "wb", buffering=0) as filler:
        try:
            while True:
                filler.write(block)
        except OSError:
            pass
    with open(path, "ab", buffering=0) as filler:  # and the last bytes a block did not fit in
        try:
            while True:
                filler.write(bytes(4096))
        except OSError:
            pass


def _named(process: psutil.Process) -> str:
    try:
        return f"pid {process.pid} ({process.status()}: {' '.join(process.cmdline())[:80]})"
    except psutil.Error:
        return f"pid {process.pid}"
