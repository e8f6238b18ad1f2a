"""Real local clusters as the live tests use them: waiting on a condition, a job's end and output, its tasks'
processes and groups."""

import time
from collections.abc import Callable
from pathlib import Path

import psutil

from gangsched.client.master_client import MasterClient
from gangsched.deploy.local import LocalCluster
from gangsched.noded.cgroups import cgroup_of
from gangsched.protocol.records import JobInfo


def wait_until(predicate: Callable[[], object], timeout_s: float, what: str) -> object:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.02)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def ended(cluster: "Cluster", job_id: int, timeout_s: float = 60) -> JobInfo:
    """The job's info once it reached a final state."""
    found = wait_until(lambda: next((info for info in cluster.client.jobs([job_id]) if info.state.is_final), None),
                       timeout_s, f"job {job_id} to end")
    assert isinstance(found, JobInfo)
    return found


def task_output(cluster: "Cluster", job_id: int, node: str, rank: int) -> str:
    """What a task of a local cluster wrote to its output file, so far."""
    path = cluster.home / "nodes" / node / f"job-{job_id}.{rank}.out"
    return path.read_text() if path.exists() else ""


class Cluster:
    def __init__(self, local: LocalCluster, client: MasterClient, user_spool: Path) -> None:
        self.local, self.client, self.home = local, client, local.home
        self.user_spool = user_spool  # other users' outputs: NODE/USER/job-J.R.out


def memory_groups() -> set[Path]:
    """The node daemons' cgroup v1 memory folders below this process's memory group, where it has one."""
    for line in Path("/proc/self/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return set((Path("/sys/fs/cgroup/memory") / path.lstrip("/")).glob("gangsched-*"))
    return set()


def is_held(process: psutil.Process) -> bool:
    """Whether a task's process is held descheduled: stopped, or frozen in its cgroup (noded/holding.py:
    a process frozen before its stop signal took effect sleeps, frozen, until thawed)."""
    return process.status() == psutil.STATUS_STOPPED or cgroup_frozen(process.pid)


def cgroup_frozen(pid: int) -> bool:
    """Whether the process's cgroup v2 group says it is frozen."""
    group = cgroup_of(str(pid))
    if group is None:
        return False
    try:
        return "frozen 1" in (group / "cgroup.events").read_text().splitlines()
    except OSError:
        return False
