"""Where the cgroup v2 hierarchy is and which folder of it a process is in; whether a node may make
its tasks' groups below a folder.

Shared by the node's containment, the docker deploy (which folder of the host's
hierarchy to give node containers), the chaos run's watch and the tests.
"""

import os
from pathlib import Path

# the controllers a delegated group enables for its children, where its parent gave it them
_DELEGATED_CONTROLLERS = ("cpu", "memory", "pids")


def cgroup2_mount() -> Path | None:
    """Where the cgroup v2 hierarchy is mounted; None where it is not."""
    mounts = (line.split() for line in read_kernel_file("/proc/self/mountinfo").splitlines())
    return next((Path(fields[4]) for fields in mounts
                 if "cgroup2" in fields[fields.index("-") + 1:fields.index("-") + 2]), None)


def cgroup_of(pid: str) -> Path | None:
    """The cgroup v2 folder of a process ("self" for this one), where cgroup v2 is mounted."""
    mount = cgroup2_mount()
    own = next((line[3:] for line in read_kernel_file(f"/proc/{pid}/cgroup").splitlines()
                if line.startswith("0::")), None)
    if mount is None or own is None:
        return None
    return mount / own.lstrip("/")


def into_leaf(group: Path) -> Path:
    """This process moved into ``group``/daemon, a leaf of the group delegated to it (systemd's
    ``Delegate=yes``), and the controllers ``group`` has enabled for its children: cgroup v2 lets a group
    with processes give its children none. ``group``, where the tasks' groups go; OSError if it cannot."""
    leaf = group / "daemon"
    leaf.mkdir(exist_ok=True)
    (leaf / "cgroup.procs").write_text(str(os.getpid()))  # the whole process, every thread
    available = read_kernel_file(str(group / "cgroup.controllers")).split()
    wanted = [controller for controller in _DELEGATED_CONTROLLERS if controller in available]
    if wanted:
        (group / "cgroup.subtree_control").write_text(" ".join(f"+{controller}" for controller in wanted))
    return group


def node_root(node_id: str, parent: Path | None) -> Path | None:
    """A cgroup v2 folder of this node's tasks, below ``parent``; None where none can be made, or where
    a group made there could not be killed whole and its CPU read."""
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


def read_kernel_file(path: str) -> str:
    """A file of /proc or of the cgroup hierarchy, as text; empty where it is gone or may not be read."""
    try:
        with open(path) as file:
            return file.read()
    except OSError:
        return ""
