"""A chaos run: a steady mix of jobs while daemons are killed and stopped and the store fills.

On a fresh local cluster, one thread submits a seeded mix (synthetic programs, shell
commands, MPI jobs, arrays, dependencies, jobs of a second Unix account, tasks that
resume themselves with a timer and jobs that send SIGCONT to other jobs' tasks),
another watches every task's cgroup, and the run injects one fault at a time, in a
seeded order: a node daemon or the master killed with SIGKILL and started again, or
stopped with SIGSTOP and continued, or the master's state file system (a tmpfs the
run mounts) filled and freed. Faults come one after another, so the master is never
killed while its file system is full: a master that restarts on a full disk is not
tried (docs/limits.md).

Afterwards it checks what docs/architecture.md promises ("A failing store",
"Descheduled means not running"): every accepted job ended with a reason, none lost
or started twice, no process of any job left, no frozen task ran, dependents and
accounts agree with the jobs' ends.
"""

import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import psutil

from gangsched.bench.chaos_checks import Invariants, check
from gangsched.bench.chaos_mix import ChaosMix
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import LocalCluster, task_processes
from gangsched.master.client import MasterClient
from gangsched.master.connection import MasterUnreachable
from gangsched.protocol.records import JobInfo, UserInfo

FAULTS = ("node_kill", "node_stop", "master_kill", "master_stop", "store_full")
_STORE_SIZE = "64m"
_DRAIN_S = 180.0  # after the faults: how long every accepted job has to end
_SAMPLE_S = 0.02  # the cgroup watcher's interval
_RAN_NS = 1_000_000  # CPU a frozen task may show between two looks (none, but for rounding)


@dataclass
class ChaosResult:
    seed: int
    seconds: float = 0.0
    submitted: Counter[str] = field(default_factory=Counter)  # accepted jobs of each kind
    refused: int = 0  # submissions the master refused (its store full) or never answered
    faults: Counter[str] = field(default_factory=Counter)
    recoveries: Counter[str] = field(default_factory=Counter)  # faults after which every daemon served again
    frozen_looks: int = 0  # two looks in a row at a frozen task's group
    ran_while_frozen: list[str] = field(default_factory=list)
    escapes_stopped: int = 0  # tasks the nodes found running while descheduled (by process tree) and stopped
    invariants: Invariants = field(default_factory=Invariants)

    def violations(self) -> list[str]:
        found = self.invariants.violations()
        if self.ran_while_frozen:
            found.append(f"ran while frozen: {len(self.ran_while_frozen)}, e.g. {self.ran_while_frozen[:5]}")
        return found


class _FrozenWatch(threading.Thread):
    """Every ``_SAMPLE_S``, each task's cgroup v2 group: a group frozen at two looks in a row whose
    CPU grew in between ran while it was descheduled."""

    def __init__(self, home: Path, result: ChaosResult) -> None:
        super().__init__(daemon=True)
        self._home, self._result = home, result
        self.stopping = threading.Event()
        mount = next((line.split()[4] for line in Path("/proc/self/mountinfo").read_text().splitlines()
                      if " - cgroup2 " in line), None)
        self._mount = Path(mount) if mount else None

    def run(self) -> None:
        groups: dict[Path, str] = {}
        seen: dict[Path, int] = {}  # the group's CPU at the last look, where it was frozen
        refreshed = 0.0
        while self._mount is not None and not self.stopping.wait(_SAMPLE_S):
            if time.monotonic() - refreshed > 1.0:  # new tasks, read from their processes now and then
                groups = self._groups()
                refreshed = time.monotonic()
            for group, task in groups.items():
                try:
                    frozen = "1" in (group / "cgroup.freeze").read_text()
                    usage = _usage_ns(group)
                except (OSError, ValueError):
                    continue
                before = seen.pop(group, None)
                if not frozen:
                    continue
                if before is not None:
                    self._result.frozen_looks += 1
                    if usage - before > _RAN_NS:
                        self._result.ran_while_frozen.append(f"{task}: {(usage - before) / 1e6:.1f} ms")
                seen[group] = usage

    def _groups(self) -> dict[Path, str]:
        assert self._mount is not None
        found = {}
        for process in task_processes(self._home):
            try:
                own = next(line[3:] for line in Path(f"/proc/{process.pid}/cgroup").read_text().splitlines()
                           if line.startswith("0::"))
                environment = process.environ()
            except (OSError, StopIteration, psutil.Error):
                continue
            group = self._mount / own.lstrip("/")
            if (group / "cgroup.freeze").exists():
                found[group] = f"job {environment.get('GANG_JOB_ID')} rank {environment.get('GANG_RANK')}"
        return found


def _usage_ns(group: Path) -> int:
    for line in (group / "cpu.stat").read_text().splitlines():
        key, _, value = line.partition(" ")
        if key == "usage_usec":
            return int(value) * 1000
    raise ValueError("no usage_usec")


class ChaosRun:
    def __init__(self, config: ClusterConfig, minutes: float, seed: int, mpi: bool) -> None:
        self._config, self._seconds, self._mpi = config, minutes * 60, mpi
        self._random = random.Random(seed)
        self.result = ChaosResult(seed)

    def run(self) -> ChaosResult:
        home = Path(tempfile.mkdtemp(prefix="gang-chaos-"))
        store = home / "master"
        store.mkdir()
        mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={_STORE_SIZE},mode=0700", "tmpfs", str(store)]).returncode == 0
        cluster = LocalCluster(home)
        mix = ChaosMix("", home, self._random.randrange(2**32), self._config.nodes, self._mpi)
        jobs: dict[int, JobInfo] = {}
        users: list[UserInfo] = []
        try:
            state = cluster.up(self._config)
            mix.master = state.master
            jobs, users = self._chaos(cluster, mix, store if mounted else None)
        finally:
            cluster.down()
            # what no daemon ended is the run's finding, then ended here: nothing is left behind
            left = task_processes(home)
            self.result.invariants = check(mix.accepted, jobs, users, [_named(process) for process in left], home)
            for process in left:
                process.kill()
            self.result.escapes_stopped = sum(log.read_text(errors="replace").count("ran while descheduled")
                                              for log in (home / "logs").glob("node*.log*"))
            if mounted:
                subprocess.run(["umount", "-l", str(store)], check=False)
            shutil.rmtree(home, ignore_errors=True)
            mix.close()
        self.result.submitted = Counter(accepted.kind for accepted in mix.accepted.values())
        self.result.refused = mix.refused
        return self.result

    def _chaos(self, cluster: LocalCluster, mix: ChaosMix,
               store: Path | None) -> tuple[dict[int, JobInfo], list[UserInfo]]:
        watch = _FrozenWatch(cluster.home, self.result)
        watch.start()
        start = time.monotonic()
        mix.start()
        faults = [fault for fault in FAULTS if fault != "store_full" or store is not None]
        try:
            while time.monotonic() - start < self._seconds:
                time.sleep(self._random.uniform(2.0, 6.0))
                fault = self._random.choice(faults)
                self.result.faults[fault] += 1
                self._inject(cluster, fault, store)
        finally:
            mix.stop()
        with MasterClient(mix.master, timeout_s=10.0) as client:
            found = mix.drain(client, _DRAIN_S)
        watch.stopping.set()
        watch.join()
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
            cluster.restart("master", crash=True)
        elif fault in ("node_stop", "master_stop"):
            daemon = psutil.Process(state.pids[node if fault == "node_stop" else "master"])
            daemon.send_signal(signal.SIGSTOP)
            time.sleep(held)
            daemon.send_signal(signal.SIGCONT)
        else:
            assert store is not None
            _fill(store / "filler")
            time.sleep(held)
            (store / "filler").unlink()
        self._recovered(cluster, fault, node)

    def _recovered(self, cluster: LocalCluster, fault: str, node: str) -> None:
        """The master answers and every node is up again (a stopped or killed one registers anew)."""
        state = cluster.state()
        assert state is not None
        deadline = time.monotonic() + 60.0
        with MasterClient(state.master, timeout_s=1.0) as client:
            while time.monotonic() < deadline:
                try:
                    if sum(info.state == "up" for info in client.nodes()) == self._config.nodes:
                        self.result.recoveries[fault] += 1
                        return
                except MasterUnreachable:
                    pass
                time.sleep(0.1)
        print(f"after {fault} ({node}), the cluster did not recover within 60 s", file=sys.stderr)


def _fill(path: Path) -> None:
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
