"""A task's memory: its limit, its peak, and whether it passed the limit (docs/memory.md).

Where the node may make memory cgroups, each task gets one with its limit:

* cgroup v2, where the node's own group can give its children the memory
  controller: ``memory.max``, ``memory.swap.max`` 0 and ``memory.oom.group``
  1 (the kernel kills the whole task, not one process of it); its peak is
  ``memory.peak``, its kills ``oom_kill`` in ``memory.events``.
* cgroup v1 (a memory hierarchy of its own, as on hosts whose cgroups are
  hybrid): ``memory.limit_in_bytes`` (and ``memory.memsw.limit_in_bytes``,
  where swap is counted, to the same: no swap); its peak is
  ``memory.max_usage_in_bytes``, its kills ``oom_kill`` in
  ``memory.oom_control``.

The kernel then enforces the limit as the task allocates. Elsewhere (a
container whose cgroups are read only) tasks are held by process tree: the
node reads the resident memory of each task's processes (``/proc/PID/statm``)
at every heartbeat, keeps the largest sum as its peak, and ends a task found
over its limit. Pages shared between a task's processes count once for each
of them there, so that reading errs on the high side.
"""

import logging
import os
from pathlib import Path

import psutil

from gangsched.noded.task_record import MemoryReading

log = logging.getLogger("gangsched.noded")

_PAGE = os.sysconf("SC_PAGE_SIZE")
# what an emptied v1 group may still count and be given to another task: the kernel's own pages a short
# task leaves (150-320 KiB after `/bin/true` here), not what it wrote through the page cache
LEFT_BEHIND_BYTES = 1 << 20
# what a task's memory group is read and written through, by version: its peak (reset by writing 0 in v1),
# its kills, what it still counts, its processes
_FILES: dict[int, dict[str, tuple[str, int]]] = {
    2: {"peak": ("memory.peak", os.O_RDONLY), "events": ("memory.events", os.O_RDONLY)},
    1: {"peak": ("memory.max_usage_in_bytes", os.O_RDWR), "events": ("memory.oom_control", os.O_RDONLY),
        "usage": ("memory.usage_in_bytes", os.O_RDONLY), "procs": ("cgroup.procs", os.O_WRONLY)},
}


def host_memory() -> int:
    """The bytes this host has: its RAM, or less where the daemon's own cgroup limits it (a container)."""
    total: int = psutil.virtual_memory().total
    own = _own_group("memory")
    for limit_file in ("memory.max", "memory.limit_in_bytes"):
        text = _read(own / limit_file).strip() if own is not None else ""
        if text.isdigit():
            total = min(total, int(text))
    return total


class TaskMemory:
    """One task's memory cgroup, its files kept open (a read is one ``pread``: opening such a file took
    12 µs here, and a task's start and end read and wrote eight), or its processes read one by one."""

    def __init__(self, folder: Path | None, version: int, limit: int | None) -> None:
        self.folder = folder
        self._version = version
        self._limit = limit
        self._peak = 0
        self._files: dict[str, int] = {}
        if folder is None:
            return
        for role, (name, flags) in _FILES[version].items():
            try:
                self._files[role] = os.open(folder / name, flags | os.O_CLOEXEC)
            except FileNotFoundError:  # memory.peak before Linux 5.19: read as nothing
                continue

    def join(self, pid: int) -> None:
        """Put the task's first process in its v1 group (its v2 group is the task group, which it joins)."""
        if "procs" in self._files:
            os.write(self._files["procs"], str(pid).encode())

    def read(self, pids: list[int]) -> MemoryReading:
        if self.folder is None:
            resident = sum(_resident(pid) for pid in pids)
            self._peak = max(self._peak, resident)
            return MemoryReading(self._peak, self._limit is not None and resident > self._limit)
        self._peak = max(self._peak, _number(self._read("peak")))
        return MemoryReading(self._peak, _field(self._read("events"), "oom_kill") > 0)

    def emptied(self) -> bool:
        """Whether it may count another task's memory (``renew``) now that its task ended: a v1 group where
        none of its processes was killed for its limit and almost nothing is still counted (a task that
        filled the page cache leaves it counted to the group, which the next task's peak would show)."""
        if self.folder is None:
            return True  # read from the processes: nothing held
        if self._version != 1:
            return False  # a v2 group's peak, the task group's own, is not reset before Linux 6.12
        # asked once the task's v2 group is empty (noded/containment.py): its processes were those of this one
        return _number(self._read("usage")) <= LEFT_BEHIND_BYTES and _field(self._read("events"), "oom_kill") == 0

    def renew(self, limit: int | None) -> None:
        """For another task, with ``limit``, once its own ended (``emptied``): its peak counted anew."""
        unchanged = limit == self._limit  # as in a flood of one array's tasks: not written again
        self._limit, self._peak = limit, 0
        if self.folder is None:
            return
        os.write(self._files["peak"], b"0")
        if unchanged:
            return
        swap = self.folder / "memory.memsw.limit_in_bytes"
        counts_swap = swap.exists()
        if counts_swap:  # the kernel keeps the memory limit at most the memory and swap limit: raised first
            swap.write_text("-1")
        (self.folder / "memory.limit_in_bytes").write_text("-1" if limit is None else str(limit))
        if counts_swap and limit is not None:
            swap.write_text(str(limit))

    def release(self) -> bool:
        """Remove its v1 group once empty (a v2 group is the task's own); False while processes remain."""
        for role in list(self._files):
            os.close(self._files.pop(role))
        if self.folder is None or self._version != 1:
            return True
        try:
            self.folder.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False  # a process of it is still exiting: tried again at the next sweep
        return True

    def _read(self, role: str) -> str:
        fd = self._files.get(role)
        try:
            return "" if fd is None else os.pread(fd, 4096, 0).decode()
        except OSError:
            return ""


class MemoryControl:
    """The node's memory cgroups, found at start: ``version`` 2 or 1, or None where it may make none."""

    def __init__(self, node_id: str, v2_root: Path | None) -> None:
        self.version: int | None = None
        self.root: Path | None = None
        if v2_root is not None and _enable_v2(v2_root):
            self.version, self.root = 2, v2_root
            return
        own = _own_group("memory")
        if own is not None and (own / "memory.limit_in_bytes").exists():
            root = own / f"gangsched-{node_id}"
            try:
                root.mkdir(exist_ok=True)
                self.version, self.root = 1, root
            except OSError:
                return
            for left in root.iterdir():  # the empty groups of a daemon killed before it removed them
                if left.is_dir():
                    try:
                        left.rmdir()
                    except OSError:
                        log.warning("a memory cgroup an earlier daemon left still holds processes: %s", left)

    @property
    def kind(self) -> str:
        return "none: read from the processes" if self.version is None else f"cgroup v{self.version}"

    def task(self, name: str, limit: int | None, v2_group: Path | None) -> TaskMemory:
        """The memory of a task about to start; its v2 group is the task's own (``v2_group``), its v1 group
        is made as ``name``."""
        if self.version == 2 and v2_group is not None:
            if limit is not None:
                (v2_group / "memory.max").write_text(str(limit))
                (v2_group / "memory.swap.max").write_text("0")
            (v2_group / "memory.oom.group").write_text("1")
            return TaskMemory(v2_group, 2, limit)
        if self.version == 1 and self.root is not None:
            folder = self.root / name
            folder.mkdir(parents=True, exist_ok=True)  # the folder too: an earlier daemon's watchdog removes it
            if limit is not None:
                (folder / "memory.limit_in_bytes").write_text(str(limit))
                swap = folder / "memory.memsw.limit_in_bytes"
                if swap.exists():
                    swap.write_text(str(limit))
            return TaskMemory(folder, 1, limit)
        return TaskMemory(None, 0, limit)


def _enable_v2(root: Path) -> bool:
    """Give the node's task groups the memory controller, where the hierarchy lets it."""
    if "memory" not in _read(root / "cgroup.controllers").split():
        return False
    try:
        (root / "cgroup.subtree_control").write_text("+memory")
    except OSError:
        return False
    return True


def _own_group(controller: str) -> Path | None:
    """This process's cgroup folder of ``controller`` (v1), or its v2 folder where that has it."""
    for line in _read(Path("/proc/self/cgroup")).splitlines():
        number, controllers, path = line.split(":", 2)
        if controller in controllers.split(","):
            return Path("/sys/fs/cgroup") / controller / path.lstrip("/")
    return None


def _resident(pid: int) -> int:
    fields = _read(Path(f"/proc/{pid}/statm")).split()
    return int(fields[1]) * _PAGE if len(fields) > 1 else 0


def _field(text: str, name: str) -> int:
    for line in text.splitlines():
        key, _, value = line.partition(" ")
        if key == name:
            return _number(value)
    return 0


def _number(text: str) -> int:
    text = text.strip()
    return int(text) if text.isdigit() else 0


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""
