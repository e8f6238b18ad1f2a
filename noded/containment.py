"""What holds every process of a task, chosen once where the node starts (``choose_containment``):
a cgroup where the node can make one, else its process tree.

* ``CgroupContainment`` (cgroup v2, where the daemon may create groups below
  its own, or below the folder it is given): one group per task,
  ``gangsched-NODE-ID-INSTANCE/task-N`` (a folder for each daemon: the watchdog
  of one killed just before sweeps only its own); a group whose task ended
  whole is kept for a later one (``keep``). The task's first process is
  put in it at its gate, before any code of the user's runs
  (noded/task_start.py), so nothing escapes it. Signals stay the switch (a freeze
  takes 0.1-0.4 ms to write and lets a task run up to 2 ms more, measured
  here, against microseconds for a signal); the freezer then holds a
  descheduled task (``FrozenCgroupGroup``), or, with freezing off, its CPU
  is watched (``WatchedCgroupGroup``; noded/holding.py).
* ``ProcessTreeContainment`` (elsewhere, e.g. in a container whose cgroups are
  read only): the daemon is a child subreaper, so a process orphaned inside a
  task becomes the daemon's child instead of init's. A task's processes are
  its first process's descendants, plus the daemon's orphaned children (and
  theirs) that are in the task's session (the daemon spawns each task's first
  process a session of its own, and no process can join a session it was not
  born in) or that a look found among the task's before; an orphan of neither
  is killed (``ProcessTreeGroup``, watched). Nothing a process says of itself
  counts: marks in its environment are anyone's to write (another account's
  orphan that named a victim's job had it failed for running descheduled,
  and survived its own cancel).

Either way a watchdog process (``noded/watchdog.py``) waits on a pipe only
the daemon holds: when the daemon dies, even by ``kill -9``, it kills what
the daemon left, by cgroup or by the node's session mark in the environment.
It is what ends a task whose daemon died (noded/task_start.py), so a
watchdog that dies first (it ends only with the daemon, in a session of its
own that a signal to the daemon's group does not reach) is replaced at once
by a thread that waits for it (at most one a second); what a daemon and its
watchdog killed together leave, the node's next daemon kills as it starts.
"""

import ctypes
import hashlib
import itertools
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from abc import ABC, abstractmethod
from pathlib import Path

from gangsched.noded.cgroups import cgroup_of, into_leaf, node_root, read_kernel_file
from gangsched.noded.holding import supports_freezing
from gangsched.noded.memory import MemoryControl, TaskMemory
from gangsched.noded.pids import PidsControl
from gangsched.noded.task_groups import (
    CgroupGroup,
    FrozenCgroupGroup,
    ProcessTreeGroup,
    TaskGroup,
    WatchedCgroupGroup,
)
from gangsched.noded.task_record import TaskKey
from gangsched.noded.watchdog import kill_cgroups, kill_marked

log = logging.getLogger("gangsched.noded")

_PR_SET_CHILD_SUBREAPER = 36
_WATCHDOG = Path(__file__).with_name("watchdog.py")
_WATCHDOG_LIFE_S = 1.0  # a watchdog that dies sooner is replaced no sooner than this after its start
# emptied task groups a node keeps for its next tasks: more than end between two starts in a flood, where
# tasks end one at a time (docs/limits.md, "Exits, one a wake-up")
SPARE_GROUPS = 8


class ContainmentError(Exception):
    pass


class Containment(ABC):
    """The node's way of holding tasks; see the module's doc."""

    kind: str
    freezes: bool  # a descheduled task is frozen (else its CPU is watched)
    root: Path | None  # the node's cgroup v2 folder, where it has one

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        self.session = f"{node_id}:{secrets.token_hex(6)}"
        self.memory = MemoryControl(node_id, self.root)
        self._sweep_leftovers()
        self._closing = False
        # held while a watchdog is replaced, and while the daemon's children are swept (a process tree's
        # strays): the new watchdog, forked and not yet known, would be taken for a stray
        self._replacing = threading.Lock()
        self._watchdog = self._start_watchdog()
        threading.Thread(target=self._replace_watchdog_that_dies, name="watchdog", daemon=True).start()

    @abstractmethod
    def groups(self, task: TaskKey, memory_limit: int | None) -> tuple[TaskGroup, TaskMemory]:
        """What holds a task about to start: its processes, and its memory."""

    def keep(self, group: TaskGroup, memory: TaskMemory) -> bool:
        """Whether the groups of a task that ended are kept for a later task (then they are not released)."""
        return False

    @abstractmethod
    def reap_strays(self, tasks: set[TaskKey]) -> None:
        """Kill what ended tasks left running, where their group does not (``tasks``: those that run)."""

    @property
    def description(self) -> str:
        return self.kind + (f" ({self.root})" if self.root else ": a subreaper and its sweeps") + \
            f"; memory limits: {self.memory.kind}; process limits: {self._pids_kind}; descheduled tasks " + \
            ("frozen" if self.freezes else "watched")

    @property
    def _pids_kind(self) -> str:
        return "none"

    def _v1_folders(self) -> list[str]:
        """The node's cgroup v1 folders (memory, pids) its watchdog removes with the task groups in them."""
        return [str(self.memory.root)] if self.memory.version == 1 else []

    def close(self) -> None:
        """At a clean exit: the watchdog sweeps what is left (nothing, normally) and ends."""
        self._closing = True
        self._watchdog.stdin.close()  # type: ignore[union-attr]
        self._watchdog.wait(10)

    @abstractmethod
    def _watchdog_target(self) -> str: ...

    @abstractmethod
    def _sweep_leftovers(self) -> None:
        """What an earlier daemon of this node left when its watchdog died with it (a killed container)."""

    def _replace_watchdog_that_dies(self) -> None:
        while True:
            started = time.monotonic()
            returncode = self._watchdog.wait()
            if self._closing:
                return
            how = f"killed by signal {-returncode}" if returncode < 0 else f"exit status {returncode}"
            log.warning("the node's watchdog ended (%s): another takes its place", how)
            self._watchdog.stdin.close()  # type: ignore[union-attr]
            # at most one a second: a watchdog that cannot live must not make the daemon fork without end
            time.sleep(max(0.0, started + _WATCHDOG_LIFE_S - time.monotonic()))
            if self._closing:
                return
            try:
                with self._replacing:
                    self._watchdog = self._start_watchdog()
            except OSError as error:  # its interpreter gone (an upgrade): the daemon goes on without one
                log.error("no watchdog can be started (%s): the tasks of this node outlive its daemon", error)
                return

    def _start_watchdog(self) -> "subprocess.Popen[bytes]":
        return subprocess.Popen(
            [sys.executable, "-I", "-S", str(_WATCHDOG), self.kind, self._watchdog_target(), *self._v1_folders()],
            stdin=subprocess.PIPE, start_new_session=True, env={},
        )


class CgroupContainment(Containment):
    kind = "cgroup"

    def __init__(self, node_id: str, root: Path, freeze: bool, pids_max: int, pids_v1: bool) -> None:
        self.root = self._root = root
        self.pids = PidsControl(node_id, root, pids_max, pids_v1)
        self.freezes = freeze and supports_freezing(root)
        self._group_class = FrozenCgroupGroup if self.freezes else WatchedCgroupGroup
        self._made = itertools.count(1)
        self._spares: list[tuple[CgroupGroup, TaskMemory]] = []
        super().__init__(node_id)

    def groups(self, task: TaskKey, memory_limit: int | None) -> tuple[TaskGroup, TaskMemory]:
        while self._spares:
            group, memory = self._spares.pop()
            try:
                memory.renew(memory_limit)
            except OSError as error:  # a limit below what it still counts: made anew instead
                log.warning("task group %s is not reused (%s): removed", group.path, error)
                group.release()
                memory.release()
                continue
            group.reuse()
            return group, memory
        name = f"task-{next(self._made)}"
        group = self._group_class(self._root / name, self.pids)
        # the memory folder is the node's, not this daemon's: named for the daemon, for the groups an earlier
        # one left there
        return group, self.memory.task(f"{self._root.name}.{name}", memory_limit, group.path)

    def keep(self, group: TaskGroup, memory: TaskMemory) -> bool:
        """Kept where its task ended whole: a group made and removed for each task was a tenth of the
        node's work in a flood of short jobs (docs/limits.md, "Task groups kept for the next task")."""
        if len(self._spares) >= SPARE_GROUPS or not isinstance(group, CgroupGroup) or not group.emptied() \
                or not memory.emptied():
            return False  # released instead (a task group found empty here is removed as any other)
        self._spares.append((group, memory))
        return True

    def reap_strays(self, tasks: set[TaskKey]) -> None:
        """Nothing: a task's group holds every process it started, and is killed whole."""

    @property
    def _pids_kind(self) -> str:
        return self.pids.kind if not self.pids.limit else f"{self.pids.limit} a task ({self.pids.kind})"

    def _v1_folders(self) -> list[str]:
        return super()._v1_folders() + ([str(self.pids.v1_root)] if self.pids.v1_root is not None else [])

    def _watchdog_target(self) -> str:
        return str(self._root)

    def _sweep_leftovers(self) -> None:
        """Every folder of an earlier daemon of this node (``gangsched-NODE-ID-INSTANCE``), and its tasks."""
        earlier = [folder for folder in self._root.parent.glob(f"gangsched-{self.node_id}-*")
                   if folder.is_dir() and folder != self._root]
        left = sum(kill_cgroups(str(folder)) for folder in earlier)
        if left:
            log.warning("killed %d processes an earlier daemon of this node left behind", left)


class ProcessTreeContainment(Containment):
    kind = "process-tree"
    freezes = False
    root = None

    def __init__(self, node_id: str) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
        self._groups: dict[int, ProcessTreeGroup] = {}  # by the pid of each task's first process: its session
        super().__init__(node_id)

    def groups(self, task: TaskKey, memory_limit: int | None) -> tuple[TaskGroup, TaskMemory]:
        return ProcessTreeGroup(self), self.memory.task(task.name, memory_limit, None)

    def started(self, group: ProcessTreeGroup) -> None:
        self._groups[group.leader] = group

    def ended(self, group: ProcessTreeGroup) -> None:
        self._groups.pop(group.leader, None)

    def tree_of(self, group: ProcessTreeGroup) -> list[int]:
        """The task's processes: its first process's descendants, and the daemon's orphans of its own."""
        found = _descendants(group.leader) if group.leader else []
        for orphan in self._orphans():
            if self._owner(orphan) is group:
                found += [orphan, *_descendants(orphan)]
        return found

    def reap_strays(self, tasks: set[TaskKey]) -> None:
        """Kill orphans of no task running here (they left its session unseen, or outlived it); reap dead ones."""
        with self._replacing:
            for orphan in self._orphans():
                try:
                    if os.waitpid(orphan, os.WNOHANG)[0]:
                        continue
                except ChildProcessError:
                    continue
                if self._owner(orphan) is None:
                    log.warning("killed process %d: orphaned by a task, and of no task running here", orphan)
                    _kill(orphan, signal.SIGKILL)

    def _orphans(self) -> list[int]:
        """The daemon's children that are neither a task's first process nor its watchdog."""
        return [child for child in _children(os.getpid())
                if child not in self._groups and child != self._watchdog.pid]

    def _owner(self, orphan: int) -> ProcessTreeGroup | None:
        """The task an orphan is of: its session's, else the one a look found it in before."""
        group = self._groups.get(_session(orphan))
        if group is not None:
            return group
        return next((group for group in self._groups.values() if group.knows(orphan)), None)

    def _watchdog_target(self) -> str:
        return self.session

    def _sweep_leftovers(self) -> None:
        left = kill_marked(f"{self.node_id}:")  # no task of this daemon's session runs yet
        if left:
            log.warning("killed %d processes an earlier daemon of this node left behind", left)


def choose_containment(node: str, spool: Path, wanted: str = "auto", freeze: bool = True,
                       parent: Path | None = None, delegated: bool = False, pids_max: int = 0,
                       pids_v1: bool = False) -> Containment:
    """``wanted``: auto, cgroup or process-tree; ``parent``: the cgroup v2 folder to make the node's groups
    below (None: the daemon's own group); ``delegated``: the daemon's own group is its to manage (it
    moves itself into a leaf of it first: noded/cgroups.py); ``pids_max``: the processes and threads a task
    may have at once, where its group can say (0: no limit), in a cgroup v1 pids group of its own if
    ``pids_v1``."""
    if delegated and parent is None:
        own = cgroup_of("self")
        try:
            if own is None:
                raise OSError("no cgroup v2 hierarchy is mounted")
            parent = into_leaf(own)
        except OSError as error:
            raise ContainmentError(f"the cgroup delegated to this daemon cannot be used: {error}") from None
    node_id = f"{node}-{hashlib.sha256(str(spool.resolve()).encode()).hexdigest()[:8]}"
    # a folder of this daemon's own: the watchdog of one killed just before sweeps only its predecessor's
    instance = f"{node_id}-{secrets.token_hex(4)}"
    root = None if wanted == "process-tree" else node_root(instance, parent or cgroup_of("self"))
    if root is not None:
        return CgroupContainment(node_id, root, freeze, pids_max, pids_v1)
    if wanted == "cgroup":
        below = parent or "the daemon's group"
        raise ContainmentError(f"no cgroup v2 folder can be made below {below} on this node")
    return ProcessTreeContainment(node_id)


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
            children += [int(child) for child in read_kernel_file(f"/proc/{pid}/task/{thread}/children").split()]
    except OSError:
        pass
    return children


def _session(pid: int) -> int:
    """The session a process is in (0 where it is gone): the sixth field of its stat, after its name."""
    stat = read_kernel_file(f"/proc/{pid}/stat")
    fields = stat[stat.rfind(")") + 2:].split()
    return int(fields[3]) if len(fields) > 3 else 0


def _kill(pid: int, sig: signal.Signals) -> None:
    try:
        os.kill(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass

