"""How quickly preemption by suspension acts, on a fresh local cluster (docs/limits.md).

Four nodes; ``batch`` over all of them (tier 1, its gangs suspended when a
higher tier needs their nodes) and ``debug`` over two (tier 2, a shorter
quantum). In each run a spinning batch gang runs on the four nodes; a debug
job is submitted, which the master places at once on two of them. Timed from
the tasks themselves: from the debug job's placement (its start time, as the
master wrote it) to its task's first instruction (the time it writes down),
and to the batch gang held on all four nodes; from the debug job's end (as
the master wrote it) to the batch gang's CPU clock moving again; and the CPU
the batch gang used while it was held.
"""

import getpass
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil

from gangsched.client.master_client import MasterClient
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import task_processes, temporary_local_cluster
from gangsched.noded.cgroups import cgroup_of
from gangsched.protocol.records import JobSpec, JobState

BATCH_QUANTUM_MS = 200
DEBUG_QUANTUM_MS = 50
CONFIG = f"""\
[[nodes]]
names = "node[1-4]"

[[partitions]]
name = "batch"
default = true
preempt_mode = "suspend"
quantum_ms = {BATCH_QUANTUM_MS}

[[partitions]]
name = "debug"
nodes = "node[1-2]"
priority_tier = 2
quantum_ms = {DEBUG_QUANTUM_MS}
"""
_POLL_S = 0.002


@dataclass(frozen=True)
class PreemptRun:
    debug_runs_s: float  # placement -> the debug task's first instruction
    batch_held_s: float  # placement -> every batch task held
    batch_resumes_s: float  # the debug job's end -> the batch gang's CPU moving again
    held_cpu_ms: float  # what the batch gang's tasks used while every one was held


def measure_preempt(runs: int) -> list[PreemptRun]:
    with tempfile.TemporaryDirectory() as folder:
        config_file = Path(folder) / "gangsched.toml"
        config_file.write_text(CONFIG)
        config = ClusterConfig.from_file(config_file, http_bind="")
        with temporary_local_cluster(config) as cluster:
            state = cluster.state()
            assert state is not None
            with cluster.client(state) as client:
                return [_preemption(client, cluster.home, Path(folder) / f"debug-{run}") for run in range(runs)]


def _preemption(client: MasterClient, home: Path, marker: Path) -> PreemptRun:
    """One run: a spinning batch gang over the four nodes, a debug job of one task that displaces it."""
    user = getpass.getuser()
    batch = client.submit(JobSpec(name="spin", user=user, tasks=4, argv=["sh", "-c", "while :; do :; done"]))
    _wait(lambda: client.job(batch).state is JobState.RUNNING and _cpu_ns(home, batch) > 0)
    debug = client.submit(JobSpec(name="quick", user=user, tasks=1, partition="debug", argv=[
        "sh", "-c", f"date +%s.%N > {marker}.tmp && mv {marker}.tmp {marker}; sleep 1"]))
    _wait(lambda: len(held := [_held(process) for process in task_processes(home, batch)]) == 4 and all(held))
    held_at, held_cpu = time.time(), _cpu_ns(home, batch)
    _wait(lambda: client.job(debug).state is JobState.COMPLETED)
    cpu_while_held = _cpu_ns(home, batch) - held_cpu
    _wait(lambda: _cpu_ns(home, batch) > held_cpu + cpu_while_held + 1_000_000)
    resumed_at = time.time()
    info = client.job(debug)
    assert info.start_time is not None and info.end_time is not None
    client.cancel(batch, user)
    _wait(lambda: client.job(batch).state.is_final)
    return PreemptRun(debug_runs_s=float(marker.read_text()) - info.start_time,
                      batch_held_s=held_at - info.start_time, batch_resumes_s=resumed_at - info.end_time,
                      held_cpu_ms=cpu_while_held / 1e6)


def summary(results: list[PreemptRun]) -> dict[str, float]:
    """Median and largest of each figure, in ms."""
    figures: dict[str, float] = {}
    for name in ("debug_runs_s", "batch_held_s", "batch_resumes_s"):
        values = [getattr(result, name) * 1000 for result in results]
        figures[f"{name.removesuffix('_s')}_median_ms"] = statistics.median(values)
        figures[f"{name.removesuffix('_s')}_max_ms"] = max(values)
    figures["held_cpu_max_ms"] = max(result.held_cpu_ms for result in results)
    return figures


def _wait(done: Callable[[], bool], timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            raise TimeoutError("the preemption did not happen in time: see the cluster's logs")
        time.sleep(_POLL_S)


def _held(process: psutil.Process) -> bool:
    """Stopped, or frozen in its cgroup (noded/holding.py)."""
    try:
        if process.status() == psutil.STATUS_STOPPED:
            return True
    except psutil.NoSuchProcess:
        return False
    group = cgroup_of(str(process.pid))
    try:
        return group is not None and "frozen 1" in (group / "cgroup.events").read_text().splitlines()
    except OSError:
        return False


def _cpu_ns(home: Path, job: int) -> int:
    total = 0
    for process in task_processes(home, job):
        try:
            times = process.cpu_times()
        except psutil.NoSuchProcess:
            continue
        total += int((times.user + times.system) * 1e9)
    return total
