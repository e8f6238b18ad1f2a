"""Where the cgroup v2 hierarchy is and which folder of it a process is in; whether a node may make
its tasks' groups below a folder.

Shared by the node's containment, the docker deploy (which folder of the host's
hierarchy to give node containers), the chaos run's watch and the tests.
"""

from pathlib import Path


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
