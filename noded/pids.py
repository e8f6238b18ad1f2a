"""How many processes and threads a task may have at once (``pids.max``), where the node holds its tasks
in cgroups: a fork bomb fails its own forks, and no other task or daemon of the node runs out of pids.

* cgroup v2, where the node's own group can give its children the pids controller: ``pids.max`` of the
  task's own group;
* cgroup v1 (a pids hierarchy of its own, as on hosts whose cgroups are hybrid), where asked
  (``--task-pids-v1``): a group of the task's own in it, which its first process joins at its gate, as
  its v1 memory group (noded/memory.py). A join is a cgroup migration, which takes the hierarchy's one
  lock: a sixth of the rate of a flood of short jobs here (docs/limits.md).

Elsewhere the limit is not kept: the node's log says so as it starts.
"""

import contextlib
import os
from pathlib import Path

from gangsched.noded.cgroups import read_kernel_file


class TaskPids:
    """One task's process limit: the file that holds it, and where it has one, its v1 group's own."""

    def __init__(self, folder: Path | None, v1: bool, limit: int) -> None:
        self._folder, self._v1 = folder, v1
        self._procs_fd: int | None = None
        if folder is None:
            return
        if v1:
            folder.mkdir(exist_ok=True)
            self._procs_fd = os.open(folder / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        (folder / "pids.max").write_text(str(limit) if limit else "max")

    def join(self, pid: int) -> None:
        """Put the task's first process in its v1 group (its v2 group is the task's own, which it joins)."""
        if self._procs_fd is not None:
            os.write(self._procs_fd, str(pid).encode())

    def emptied(self) -> bool:
        """Whether no process of the task it held is left in it (a v2 group: the task group says)."""
        return self._folder is None or not self._v1 or read_kernel_file(str(self._folder / "pids.current")) == "0\n"

    def release(self) -> bool:
        """Remove its v1 group once empty; False while a process of it is still exiting."""
        if self._procs_fd is not None:
            os.close(self._procs_fd)
            self._procs_fd = None
        if self._folder is None or not self._v1:
            return True
        try:
            self._folder.rmdir()
        except FileNotFoundError:
            return True
        except OSError:
            return False
        return True


class PidsControl:
    """The node's pids cgroups, found at start: in its v2 tasks' groups, in a v1 hierarchy (``v1``: where
    asked, at a cgroup migration more a task), or none."""

    def __init__(self, node_id: str, v2_root: Path, limit: int, v1: bool) -> None:
        self.limit = limit
        self._v1_root: Path | None = None
        self.kind = "none"
        if not limit:
            self.kind = "none asked"
        elif _enable_v2(v2_root):
            self.kind = "cgroup v2"
        elif not v1:
            self.kind = "none: only cgroup v1 has the pids controller, and --task-pids-v1 is off"
        else:
            own = _own_v1_group()
            if own is not None and (own / "cgroup.procs").exists():
                root = own / f"gangsched-{node_id}"
                try:
                    root.mkdir(exist_ok=True)
                except OSError:
                    return
                self._v1_root, self.kind = root, "cgroup v1"
                for left in root.iterdir():  # the empty groups of a daemon killed before it removed them
                    if left.is_dir():
                        with contextlib.suppress(OSError):
                            left.rmdir()

    def task(self, name: str, v2_group: Path) -> TaskPids:
        """The process limit of a task about to start in the v2 group ``v2_group`` (its v1 group: ``name``)."""
        if self.kind == "cgroup v2":
            return TaskPids(v2_group, False, self.limit)
        if self._v1_root is not None:
            return TaskPids(self._v1_root / name, True, self.limit)
        return TaskPids(None, False, self.limit)

    @property
    def v1_root(self) -> Path | None:
        """The node's v1 pids folder, which its watchdog removes with the node's groups."""
        return self._v1_root


def _enable_v2(root: Path) -> bool:
    if "pids" not in read_kernel_file(str(root / "cgroup.controllers")).split():
        return False
    try:
        (root / "cgroup.subtree_control").write_text("+pids")
    except OSError:
        return False
    return True


def _own_v1_group() -> Path | None:
    for line in read_kernel_file("/proc/self/cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        if "pids" in controllers.split(","):
            return Path("/sys/fs/cgroup/pids") / path.lstrip("/")
    return None
