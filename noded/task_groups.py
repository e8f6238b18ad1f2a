"""The processes of one task, one class for each way a node holds them (noded/containment.py
chooses the way once, where the node starts).

A task's first process may fork, double-fork or start a ``setsid`` daemon;
all of them are stopped and continued with the task and killed when it ends.
The switch path signals the processes found at the last look, by pidfd (a pid
recycled since is never signalled), and reads nothing; ``take_in_new_processes``,
called after each switch that stopped the task, looks again and gives the
processes started since the last signal, so a fork is stopped within the
switch's wake-up, not the next. A process found so may have started another
before the signal reached it, so the node looks again until a look finds
nothing new (a stopped process starts none, nor does one with a stop signal
pending: the kernel holds its fork back).

What keeps a descheduled task stopped whatever signals it gets
(noded/holding.py): its cgroup frozen (``FrozenCgroupGroup``), or its
processes' CPU time watched (``WatchedCgroupGroup``, ``ProcessTreeGroup``).
"""

import os
import signal
from abc import ABC, abstractmethod
from pathlib import Path
from typing import Protocol

from gangsched.noded.holding import ESCAPE_NS, Freezer, cpu_ns_of
from gangsched.noded.pids import PidsControl


class TaskGroup(ABC):
    path: Path | None = None  # its cgroup, where it has one

    def __init__(self) -> None:
        self.leader = 0
        self._members: dict[int, int] = {}  # pid -> pidfd, as at the last look
        self._last_signal: signal.Signals | None = None
        # a task on a terminal (srun --pty): a process its shell stopped (^Z) is not continued with the
        # task's turn, but stays stopped until the shell continues it (fg, bg)
        self.job_control = False
        self._stopped_by_itself: set[int] = set()  # such processes, as the last stop found them

    def adopt(self, leader: int) -> None:
        """The launcher's pid: in the group before it returns (the launcher joins it too)."""
        self.leader = leader
        self._join(leader)
        self.take_in_new_processes()

    @abstractmethod
    def pids(self) -> list[int]: ...

    def stop(self) -> None:
        if self._held_by_freezing():  # no stop signal: every process stopped now stopped itself
            self._last_signal = None
            self.keep_stopped()
            return
        if self.job_control:  # a ^Z not yet taken counts: once the stop signal holds it, a continue discards it
            self._stopped_by_itself = {pid for pid in self._members if _stopped(pid) or _stop_pending(pid)}
        self._signal_known(signal.SIGSTOP)

    @abstractmethod
    def keep_stopped(self) -> None:
        """After a stop, once the switch is applied: hold it so that no signal resumes it."""

    def resume(self) -> None:
        """Its processes continued, the last found first: a parent (a shell) continued before its child could
        see the child stopped and take it for a job stopped by its user."""
        self._release_hold()
        if self._held_by_freezing():
            return
        if self.job_control:  # a key's stop (^Z) that came while the task was held is kept too
            self._stopped_by_itself |= {pid for pid in self._members if _stop_pending(pid)}
        self._last_signal = signal.SIGCONT
        for pid, pidfd in reversed(self._members.items()):
            if pid not in self._stopped_by_itself:
                _send(pidfd, signal.SIGCONT)
        self._signal_whole(signal.SIGCONT)

    def _held_by_freezing(self) -> bool:
        """Whether its switches freeze and thaw it without a signal: a task on a terminal in a group that
        freezes, whose shell alone stops and continues its jobs (a ^Z while frozen is taken on the thaw)."""
        return False

    def escaped(self) -> bool:
        """Whether it ran since it was stopped (someone continued it); stopped again if so."""
        return False

    def take_in_new_processes(self) -> bool:
        """Look again for the task's processes; those new since the last look get the last signal.
        Whether there were any."""
        current = self._current()
        if current is None:
            return False
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
        self._found(new)
        return bool(new)

    def send(self, sig: signal.Signals) -> None:
        """Every process of the task, continued (thawed) so that it handles the signal."""
        self._release_hold()
        self.take_in_new_processes()
        self._signal_known(sig)
        self._signal_known(signal.SIGCONT)

    def deliver(self, sig: signal.Signals) -> None:
        """A user's signal to every process of the task, left stopped or frozen as it is: a descheduled task
        takes it when its turn comes (the stop and continue the switches send are not this)."""
        self.take_in_new_processes()
        self._signal_whole(sig)
        for pidfd in self._members.values():
            _send(pidfd, sig)

    @abstractmethod
    def kill(self) -> None: ...

    def cpu_ns(self) -> int | None:
        """CPU time of every process of the task, where the group counts it."""
        return None

    def release(self) -> bool:
        """Forget the processes and remove what holds them once it is empty; False while processes remain."""
        for pid in list(self._members):
            os.close(self._members.pop(pid))
        return self._remove()

    @abstractmethod
    def _current(self) -> set[int] | None:
        """The task's processes now; None where a look tells they are those of the last look."""

    @abstractmethod
    def _join(self, leader: int) -> None:
        """Put the task's first process where the group holds it."""

    @abstractmethod
    def _release_hold(self) -> None: ...

    @abstractmethod
    def _found(self, new: set[int]) -> None:
        """A look found these processes new."""

    def _remove(self) -> bool:
        return True

    def _signal_known(self, sig: signal.Signals) -> None:
        self._last_signal = sig
        self._signal_whole(sig)
        for pidfd in self._members.values():
            _send(pidfd, sig)

    @abstractmethod
    def _signal_whole(self, sig: signal.Signals) -> None:
        """Signal what the group reaches beyond the processes known (before them)."""


class CgroupGroup(TaskGroup):
    """A task in a cgroup v2 group of its own: every process it ever starts is in the group, killed by
    ``cgroup.kill`` race-free, and counted in ``cpu.stat``. Its files stay open: a look is one read. Once
    its task ended whole, it may hold another (``emptied``, ``reuse``; noded/containment.py)."""

    def __init__(self, path: Path, pids: PidsControl) -> None:
        super().__init__()
        self.path = path
        path.mkdir(exist_ok=True)
        self._pids = pids.task(f"{path.parent.name}.{path.name}", path)
        self._procs_fd: int | None = os.open(path / "cgroup.procs", os.O_RDWR | os.O_CLOEXEC)
        self._stat_fd: int | None = os.open(path / "cpu.stat", os.O_RDONLY | os.O_CLOEXEC)
        self._kill_fd: int | None = os.open(path / "cgroup.kill", os.O_WRONLY | os.O_CLOEXEC)
        self._listed = b""  # what the group listed at the last look
        self._cpu_before_ns = 0  # what it counted for the tasks it held before this one

    def emptied(self) -> bool:
        """Whether its task ended whole (no process is left in it); if so, it is ready for another task
        (``reuse``): thawed, and nothing of the last one remembered but the CPU it used."""
        if self._listing() or not self._pids.emptied():
            return False
        for pid in list(self._members):
            os.close(self._members.pop(pid))
        self._release_hold()
        self._listed, self._last_signal = b"", None
        return True

    def reuse(self) -> None:
        """Hold another task, an emptied group's next (its CPU counted from now)."""
        self.leader = 0
        self._cpu_before_ns = self._usage_ns() or 0

    def _join(self, leader: int) -> None:
        assert self._procs_fd is not None
        os.write(self._procs_fd, str(leader).encode())
        self._pids.join(leader)

    def pids(self) -> list[int]:
        return [int(pid) for pid in self._listing().split()]

    def _current(self) -> set[int] | None:
        # after most switches the group lists what it listed before, which one read tells: the rest
        # of a look was a fifth of a node's switch, on a core whose caches the jobs keep cold
        listed = self._listing()
        if listed == self._listed:
            return None
        self._listed = listed
        return {int(pid) for pid in listed.split()}

    def kill(self) -> None:
        if self._kill_fd is not None:  # else released: nothing left to kill
            os.write(self._kill_fd, b"1")

    def _signal_whole(self, sig: signal.Signals) -> None:
        """Nothing beyond: the processes known are those the group listed at the last look."""

    def cpu_ns(self) -> int | None:
        usage = self._usage_ns()
        return None if usage is None else usage - self._cpu_before_ns

    def _usage_ns(self) -> int | None:
        if self._stat_fd is None:
            return None
        for line in os.pread(self._stat_fd, 4096, 0).splitlines():
            key, _, value = line.partition(b" ")
            if key == b"usage_usec":
                return int(value) * 1000
        return None

    def _remove(self) -> bool:
        for fd in (self._procs_fd, self._stat_fd, self._kill_fd):
            if fd is not None:
                os.close(fd)
        self._procs_fd = self._stat_fd = self._kill_fd = None
        pids_released = self._pids.release()
        try:
            self._group.rmdir()
        except FileNotFoundError:
            return pids_released
        except OSError:
            return False
        return pids_released

    @property
    def _group(self) -> Path:
        assert self.path is not None
        return self.path

    def _listing(self) -> bytes:
        """What ``cgroup.procs`` lists now: one pid a line (nothing once released)."""
        return b"" if self._procs_fd is None else os.pread(self._procs_fd, 1 << 16, 0)


class FrozenCgroupGroup(CgroupGroup):
    """Descheduled, its group is frozen: no signal resumes it, and what it forks is frozen with it."""

    def __init__(self, path: Path, pids: PidsControl) -> None:
        super().__init__(path, pids)
        self._freezer: Freezer | None = Freezer(self._group)

    def keep_stopped(self) -> None:
        if self._freezer is not None:
            self._freezer.freeze()

    def _held_by_freezing(self) -> bool:
        return self.job_control and self._freezer is not None

    def _release_hold(self) -> None:
        if self._freezer is not None:
            self._freezer.thaw()

    def _found(self, new: set[int]) -> None:
        """Nothing to note: what a frozen group forks is frozen with it."""

    def _remove(self) -> bool:
        if self._freezer is not None:
            self._freezer.close()
            self._freezer = None
        return super()._remove()


class _Watched(TaskGroup):
    """Descheduled, its processes' CPU time is noted when they are stopped and looked at again
    (``escaped``): one that ran since is stopped again, with what it started meanwhile."""

    _held_cpu_ns: int | None = None  # its processes' CPU when they were stopped; None while it runs

    def keep_stopped(self) -> None:
        self._held_cpu_ns = cpu_ns_of(self._members)

    def _release_hold(self) -> None:
        self._held_cpu_ns = None

    def escaped(self) -> bool:
        if self._held_cpu_ns is None:
            return False
        used = cpu_ns_of(self._members)
        if used - self._held_cpu_ns <= ESCAPE_NS:
            self._held_cpu_ns = min(self._held_cpu_ns, used)  # a process of it exited: its CPU left the sum
            return False
        self.take_in_new_processes()
        self._signal_known(signal.SIGSTOP)
        self._held_cpu_ns = cpu_ns_of(self._members)
        return True

    def _found(self, new: set[int]) -> None:
        if new and self._held_cpu_ns is not None:  # what they ran before they were found is no escape
            self._held_cpu_ns += cpu_ns_of(new)


class WatchedCgroupGroup(_Watched, CgroupGroup):
    """In a cgroup, watched rather than frozen (`gang noded --freeze-descheduled false`)."""


class ProcessTree(Protocol):
    """The node's knowledge of its tasks' process trees (noded/containment.py)."""

    def tree_of(self, group: "ProcessTreeGroup") -> list[int]: ...
    def started(self, group: "ProcessTreeGroup") -> None: ...
    def ended(self, group: "ProcessTreeGroup") -> None: ...


class ProcessTreeGroup(_Watched):
    """A task's processes as its first process's descendants and the node daemon's orphans of its session
    or found in it before (``ProcessTree.tree_of``); the CPU counted is the first process's."""

    def __init__(self, tree: ProcessTree) -> None:
        super().__init__()
        self._tree = tree

    def pids(self) -> list[int]:
        return self._tree.tree_of(self)

    def knows(self, pid: int) -> bool:
        """Whether a look found ``pid`` among the task's processes, and it is the same process still (its
        pidfd says so: a pid used again is another process)."""
        pidfd = self._members.get(pid)
        if pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(pidfd, 0)
        except ProcessLookupError:
            return False
        return True

    def _current(self) -> set[int] | None:
        return set(self._tree.tree_of(self))

    def _join(self, leader: int) -> None:
        self._tree.started(self)

    def _remove(self) -> bool:
        self._tree.ended(self)
        return True

    def kill(self) -> None:
        for _ in range(3):  # stop them all first, so none forks a child we do not see
            self.take_in_new_processes()
            self._signal_known(signal.SIGSTOP)
        self.take_in_new_processes()
        self._signal_known(signal.SIGKILL)

    def _signal_whole(self, sig: signal.Signals) -> None:
        # its process group first: a process forked since the last look is in it
        try:
            os.killpg(self.leader, sig)
        except (ProcessLookupError, PermissionError):
            pass


def _stopped(pid: int) -> bool:
    """Whether the process is stopped (its state in /proc, after its name: T)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as stat:
            return stat.read().rpartition(b")")[2].split(maxsplit=1)[0] == b"T"
    except (OSError, IndexError):  # gone
        return False


_KEY_STOPS = (1 << (signal.SIGTSTP - 1)) | (1 << (signal.SIGTTIN - 1)) | (1 << (signal.SIGTTOU - 1))


def _stop_pending(pid: int) -> bool:
    """Whether a stop of its terminal's (^Z, a read or write from the background) waits to be taken by the
    process: continued, it would lose it (a continue discards pending stops)."""
    try:
        with open(f"/proc/{pid}/status", "rb") as status:
            lines = status.read().splitlines()
    except OSError:  # gone
        return False
    pending = [int(line.split()[1], 16) for line in lines if line.startswith((b"SigPnd:", b"ShdPnd:"))]
    return any(mask & _KEY_STOPS for mask in pending)


def _send(pidfd: int, sig: signal.Signals) -> None:
    try:
        signal.pidfd_send_signal(pidfd, sig)
    except (ProcessLookupError, PermissionError):
        pass
