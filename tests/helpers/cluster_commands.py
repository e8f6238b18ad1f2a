"""The gang command run against a live cluster, and what a job's tasks used."""

import os
import subprocess
import sys

from gangsched.deploy.local import task_processes
from gangsched.noded.cgroups import cgroup_of


def gang(cluster, *args: str) -> "subprocess.CompletedProcess[str]":
    """`gang ARGS` as a user's shell runs it, against ``cluster``."""
    return subprocess.run([sys.executable, "-m", "gangsched.cli", *args], capture_output=True, text=True,
                          env={**os.environ, "GANG_MASTER": cluster.client.endpoint})


def cpu_ns(cluster, job: int) -> int:
    """The CPU time of a job's tasks: their cgroups' where each has one, else their processes'."""
    total = 0
    for process in task_processes(cluster.home, job):
        group = cgroup_of(str(process.pid))
        stat = group / "cpu.stat" if group is not None else None
        if stat is not None and stat.exists() and "gangsched" in str(group):
            total += int(stat.read_text().split()[1]) * 1000  # usage_usec
        else:
            times = process.cpu_times()
            total += int((times.user + times.system) * 1e9)
    return total
