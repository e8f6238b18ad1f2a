"""What holds every process of a task: a cgroup where the node can make one, else its process tree.

A task's first process may fork, double-fork or start a ``setsid`` daemon;
all of them are stopped and continued with the task and killed when it ends.

* ``cgroup`` (cgroup v2, where the daemon may create groups below its own):
  one group per task, ``gangsched-NODE-ID/job-J.R``. The task's launcher
  joins it before any code of the user's runs, so nothing escapes it:
  SIGSTOP and SIGCONT go to every process the group lists, ``cgroup.kill``
  kills them all, race-free, and ``cpu.stat`` counts the CPU time of all of
  them. Signals stay the switch (a freeze takes 0.1-0.4 ms to write and lets
  a task run up to 2 ms more, measured here, against microseconds for a
  signal); the freezer then holds a descheduled task, so that no signal
  resumes it (``noded/holding.py``).
* ``process-tree`` (elsewhere, e.g. in a container whose cgroups are read
  only): the daemon is a child subreaper, so a process orphaned inside a task
  becomes the daemon's child instead of init's. A task's processes are its
  first process's descendants, plus the daemon's orphaned children that carry
  the task's GANG_JOB_ID and GANG_RANK; an orphan that carries none is killed.
  Signals go to each of them; the CPU time counted is the first process's.

Either way a watchdog process (``noded/watchdog.py``) waits on a pipe only
the daemon holds: when the daemon dies, even by ``kill -9``, it kills what
the daemon left, by cgroup or by the node's session mark in the environment.
"""

import ctypes
import hashlib
import logging
import os
import secrets
import signal
import subprocess
import sys
from pathlib import Path

from gangsched.noded.holding import ESCAPE_NS, Freezer, cpu_ns_of, supports_freezing
from gangsched.noded.memory import MemoryControl
from gangsched.noded.watchdog import kill_cgroups, kill_marked
from gangsched.protocol import task_environment

log = logging.getLogger("gangsched.noded")

_PR_SET_CHILD_SUBREAPER = 36
_WATCHDOG = Path(__file__).with_name("watchdog.py")


class ContainmentError(Exception):
    pass


class TaskGroup:
    """The processes of one task.

    The switch path signals the processes found at the last look, by pidfd (a pid
    recycled since is never signalled), and reads nothing; ``follow``, called
    after each switch that stopped the task, looks again and gives the processes
    started since the last signal, so a fork is stopped within the switch's
    wake-up, not the next. A process found so may have started another before the
    signal reached it, so the node looks again until a look finds nothing new (a
    stopped process starts none, nor does one with a stop signal pending: the
    kernel holds its fork back). The cgroup's files stay open: a look is one read.
    """

    def __init__(self, containment: "Containment", job_id: int, rank: int) -> None:
        self._containment = containment
        self.job_id, self.rank = job_id, rank
        self.leader = 0
        self.path: Path | None = None  # its cgroup, if it has one
        self._procs_fd: int | None = None
        self._stat_fd: int | None = None
        self._members: dict[int, int] = {}  # pid -> pidfd, as at the last look
        self._listed = b""  # what the cgroup listed at the last look
        self._last_signal: signal.Signals | None = None
        self._freezer: Freezer | None = None  # what holds it while descheduled, in a cgroup ...
        self._held_cpu_ns: int | None = None  # ... else its processes' CPU when they were stopped
        if containment.root is not None:
            self.path = containment.root / f"job-{job_id}.{rank}"
            self.path.mkdir(exist_ok=True)
            self._procs_fd = os.open(self.path / "cgroup.procs", os.O_RDONLY | os.O_CLOEXEC)
            self._stat_fd = os.open(self.path / "cpu.stat", os.O_RDONLY | os.O_CLOEXEC)
            if containment.freezes:
                self._freezer = Freezer(self.path)

    def adopt(self, leader: int) -> None:
        """The launcher's pid: in the cgroup before it returns (the launcher joins it too)."""
        self.leader = leader
        if self.path is not None:
            (self.path / "cgroup.procs").write_text(str(leader))
        self.follow()

    def pids(self) -> list[int]:
        if self._procs_fd is not None:
            return [int(pid) for pid in self._listing(self._procs_fd).split()]
        return self._containment.tree_of(self)

    def stop(self) -> None:
        self._signal_known(signal.SIGSTOP)

    def hold(self) -> None:
        """After a stop, once the switch is applied: freeze its cgroup, or note its processes' CPU."""
        if self._freezer is not None:
            self._freezer.freeze()
        else:
            self._held_cpu_ns = cpu_ns_of(self._members)

    def resume(self) -> None:
        self._held_cpu_ns = None
        if self._freezer is not None:
            self._freezer.thaw()
        self._signal_known(signal.SIGCONT)

    def escaped(self) -> bool:
        """Held by process tree: whether it ran since it was stopped (someone continued it); if so it is
        stopped again, with any process it started meanwhile."""
        if self._held_cpu_ns is None:
            return False
        used = cpu_ns_of(self._members)
        if used - self._held_cpu_ns <= ESCAPE_NS:
            self._held_cpu_ns = min(self._held_cpu_ns, used)  # a process of it exited: its CPU left the sum
            return False
        self.follow()
        self._signal_known(signal.SIGSTOP)
        self._held_cpu_ns = cpu_ns_of(self._members)
        return True

    def follow(self) -> bool:
        """Look again for the task's processes; those new since the last look get the last signal.
        Whether there were any."""
        if self._procs_fd is not None:
            # after most switches the cgroup lists what it listed before, which one read tells: the
            # rest of a look was a fifth of a node's switch, on a core whose caches the jobs keep cold
            listed = self._listing(self._procs_fd)
            if listed == self._listed:
                return False
            self._listed = listed
            current = {int(pid) for pid in listed.split()}
        else:
            current = set(self._containment.tree_of(self))
        for pid in self._members.keys() - current:
            os.close(self._members.pop(pid))
        new = current - self._members.keys()
        for pid in new:
            try:
                self._members[pid] = pidfd = os.pidfd_open(pid)
            except OSError:  # gone already
                continue
            if self._last_signal is not None:
                _send(pidfd, self._last_signal)
        if new and self._held_cpu_ns is not None:  # what they ran before they were found is no escape
            self._held_cpu_ns += cpu_ns_of(new)
        return bool(new)

    def send(self, sig: signal.Signals) -> None:
        """Every process of the task, continued (thawed) so that it handles the signal."""
        self._held_cpu_ns = None
        if self._freezer is not None:
            self._freezer.thaw()
        self.follow()
        self._signal_known(sig)
        self._signal_known(signal.SIGCONT)

    def kill(self) -> None:
        if self.path is not None:
            (self.path / "cgroup.kill").write_text("1")
            return
        for _ in range(3):  # stop them all first, so none forks a child we do not see
            self.follow()
            self._signal_known(signal.SIGSTOP)
        self.follow()
        self._signal_known(signal.SIGKILL)

    def cpu_ns(self) -> int | None:
        """CPU time of every process of the task, where a cgroup counts it."""
        if self._stat_fd is None:
            return None
        for line in os.pread(self._stat_fd, 4096, 0).splitlines():
            key, _, value = line.partition(b" ")
            if key == b"usage_usec":
                return int(value) * 1000
        return None

    def release(self) -> bool:
        """Remove the cgroup once it is empty; False while processes remain."""
        for pid in list(self._members):
            os.close(self._members.pop(pid))
        if self.path is None:
            return True
        if self._freezer is not None:
            self._freezer.close()
            self._freezer = None
        for fd in (self._procs_fd, self._stat_fd):
            if fd is not None:
                os.close(fd)
        self._procs_fd = self._stat_fd = None
        try:
            self.path.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True

    @staticmethod
    def _listing(procs_fd: int) -> bytes:
        """What the cgroup's ``cgroup.procs`` lists now: one pid a line."""
        return os.pread(procs_fd, 1 << 16, 0)

    def _signal_known(self, sig: signal.Signals) -> None:
        self._last_signal = sig
        if self.path is None:  # the group first: a process forked since the last look is in it
            try:
                os.killpg(self.leader, sig)
            except (ProcessLookupError, PermissionError):
                pass
        for pidfd in self._members.values():
            _send(pidfd, sig)


class Containment:
    """The node's way of holding tasks, chosen at start; see the module's doc."""

    def __init__(self, node: str, spool: Path, wanted: str = "auto", freeze: bool = True,
                 parent: Path | None = None) -> None:
        """``parent``: the cgroup v2 folder to make the node's groups below; None: the daemon's own group."""
        self.node_id = f"{node}-{hashlib.sha256(str(spool.resolve()).encode()).hexdigest()[:8]}"
        self.session = f"{self.node_id}:{secrets.token_hex(6)}"
        self.root = None if wanted == "process-tree" else _cgroup_root(self.node_id, parent or cgroup_of("self"))
        if self.root is None and wanted == "cgroup":
            below = parent or "the daemon's group"
            raise ContainmentError(f"no cgroup v2 folder can be made below {below} on this node")
        self.kind = "cgroup" if self.root is not None else "process-tree"
        # a descheduled task is frozen where its group can be (noded/holding.py), else watched
        self.freezes = freeze and self.root is not None and supports_freezing(self.root)
        if self.root is None:
            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self.memory = MemoryControl(self.node_id, self.root)
        self._leaders: set[int] = set()
        self._sweep_leftovers()
        self._watchdog = self._start_watchdog()

    def group(self, job_id: int, rank: int) -> TaskGroup:
        return TaskGroup(self, job_id, rank)

    def started(self, group: TaskGroup) -> None:
        self._leaders.add(group.leader)

    def ended(self, group: TaskGroup) -> None:
        self._leaders.discard(group.leader)

    def tree_of(self, group: TaskGroup) -> list[int]:
        """The task's processes, found from its first process and among the daemon's orphans."""
        found = _descendants(group.leader) if group.leader else []
        for orphan in _children(os.getpid()):
            if orphan in self._leaders or orphan == self._watchdog.pid:
                continue
            mark = _marks(orphan)
            if mark == (group.job_id, group.rank):
                found += [orphan, *_descendants(orphan)]
        return found

    def reap_strays(self, tasks: set[tuple[int, int]]) -> None:
        """Kill orphans of no task running here (they cleared their marks, or outlived it); reap dead ones."""
        if self.root is not None:
            return
        for orphan in _children(os.getpid()):
            if orphan in self._leaders or orphan == self._watchdog.pid:
                continue
            try:
                if os.waitpid(orphan, os.WNOHANG)[0]:
                    continue
            except ChildProcessError:
                continue
            mark = _marks(orphan)
            if mark not in tasks:
                log.warning("killed process %d: orphaned by a task, and of no task running here", orphan)
                _kill(orphan, signal.SIGKILL)

    def close(self) -> None:
        """At a clean exit: the watchdog sweeps what is left (nothing, normally) and ends."""
        self._watchdog.stdin.close()  # type: ignore[union-attr]
        self._watchdog.wait(10)

    def _start_watchdog(self) -> "subprocess.Popen[bytes]":
        target = str(self.root) if self.root is not None else self.session
        memory = [str(self.memory.root)] if self.memory.version == 1 else []
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(_WATCHDOG), self.kind, target, *memory],
            stdin=subprocess.PIPE, start_new_session=True, env={},
        )

    def _sweep_leftovers(self) -> None:
        """What an earlier daemon of this node left when its watchdog died with it (a killed container)."""
        if self.root is not None:
            left = kill_cgroups(str(self.root))
            self.root.mkdir(exist_ok=True)
        else:
            left = kill_marked(f"{self.node_id}:")  # no task of this daemon's session runs yet
        if left:
            log.warning("killed %d processes an earlier daemon of this node left behind", left)


def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted; None where it is not."""
    return next((Path(fields[4]) for fields in (line.split() for line in _read("/proc/self/mountinfo").splitlines())
                 if "cgroup2" in fields[fields.index("-") + 1:fields.index("-") + 2]), None)


def cgroup_of(pid: str) -> Path | None:
    """The cgroup v2 folder of a process ("self" for this one), where cgroup v2 is mounted."""
    mount = cgroup2_mount()
    own = next((line[3:] for line in _read(f"/proc/{pid}/cgroup").splitlines() if line.startswith("0::")), None)
    if mount is None or own is None:
        return None
    return mount / own.lstrip("/")


def _cgroup_root(node_id: str, parent: Path | None) -> Path | None:
    """A cgroup v2 folder of this node's tasks, below ``parent``; None where none can be made."""
    if parent is None:
        return None
    root = parent / f"gangsched-{node_id}"
    try:
        root.mkdir(exist_ok=True)
        (root / "probe").mkdir(exist_ok=True)
        usable = (root / "probe" / "cgroup.kill").exists() and (root / "probe" / "cpu.stat").exists()
        (root / "probe").rmdir()
    except OSError:
        return None
    return root if usable else None


def _descendants(pid: int) -> list[int]:
    found, frontier = [], [pid]
    while frontier:
        children = [child for parent in frontier for child in _children(parent)]
        found += children
        frontier = children
    return [pid, *found]


def _children(pid: int) -> list[int]:
    children = []
    try:
        for thread in os.listdir(f"/proc/{pid}/task"):
            children += [int(child) for child in _read(f"/proc/{pid}/task/{thread}/children").split()]
    except OSError:
        pass
    return children


def _marks(pid: int) -> tuple[int, int] | None:
    """The (job, rank) a process's environment names, if it names one."""
    environment = _environment(pid)
    try:
        return int(environment[task_environment.JOB_ID]), int(environment[task_environment.RANK])
    except (KeyError, ValueError):
        return None


def _environment(pid: int) -> dict[str, str]:
    try:
        raw = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return {}
    pairs = (entry.partition(b"=") for entry in raw.split(b"\0") if entry)
    return {key.decode(errors="replace"): value.decode(errors="replace") for key, _, value in pairs}


def _send(pidfd: int, sig: signal.Signals) -> None:
    try:
        signal.pidfd_send_signal(pidfd, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _read(path: str) -> str:
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""
