"""Switch latency and scheduling overhead (docs/limits.md).

While every node runs busy tasks in two rows, each switch's latency is the
time from the master's send to the last node having sent its signals. The
overhead is the job CPU time lost against the same tasks run unscheduled
for the same wall time (measured first, with no daemon running). Both are
read from the tasks' own CPU clocks: the master learns of a quantum's CPU
only with a node's next report, one to several quanta later.
"""

import dataclasses
import os
import statistics
import subprocess
import sys
import time
import uuid
from contextlib import AbstractContextManager
from dataclasses import dataclass
from pathlib import Path

import psutil

from gangsched.bench.mix import running
from gangsched.client.master_client import MasterClient
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.noded.task_processes import process_cpu_ns
from gangsched.sim.report import percentile

# the spinning program, started here with no node daemon; the kernel kills the spinners
# when the benchmark dies, however it ends, even while they are stopped
SPIN = ["setpriv", "--pdeathsig", "KILL", "--", sys.executable, *SyntheticJob("spin").argv()[1:]]


@dataclass(frozen=True)
class SwitchResult:
    switches: int
    partitions: int
    median_ms: float
    p99_ms: float
    cpu: float  # the master's CPU, % of one core
    job_cpu_rate: float  # CPU seconds per second the scheduled tasks got
    # the CPU of every daemon process of a local cluster (master, nodes and their watchdogs, web view,
    # I/O server, their ZeroMQ threads), % of the machine as the overhead is: what the jobs lose, if
    # nothing else does; None for a docker cluster, whose processes are not this one's children
    daemons_pct: float | None = None
    overhead_pct: float | None = None  # once set beside the unscheduled rate

    def against(self, baselines: list[float]) -> "SwitchResult":
        """With the overhead against the median of the unscheduled rates measured."""
        baseline = statistics.median(baselines)
        return dataclasses.replace(self, overhead_pct=100 * (1 - self.job_cpu_rate / baseline))


# The unscheduled rate is read in segments, and the overhead taken against their median: other work
# on the host now and then takes a share of a baseline. On 2026-11-25 two runs of five, each against
# the mean of a 20 s baseline before and one after, read baselines 0.5-0.9 % below the others' (and a
# quiet host's, 1.993-1.995 CPU s/s), and so overheads of 0.44 and 0.20 % against 1.08-1.24 %.
_BASELINE_SEGMENT_S = 5.0


def unscheduled_cpu_rates(tasks: int, seconds: float) -> list[float]:
    """CPU seconds per wall second that ``tasks`` spinning processes get on their own, in each
    segment of about 5 s of ``seconds``."""
    processes = [subprocess.Popen(SPIN) for _ in range(tasks)]
    try:
        time.sleep(1.0)  # past their start-up
        pids = [process.pid for process in processes]
        segments = max(1, round(seconds / _BASELINE_SEGMENT_S))
        rates = []
        for _ in range(segments):
            before, start = _cpu_s(pids), time.monotonic()
            time.sleep(seconds / segments)
            rates.append((_cpu_s(pids) - before) / (time.monotonic() - start))
        return rates
    finally:
        for process in processes:
            process.kill()
            process.wait()


def measure_switch(cluster: AbstractContextManager[MasterClient], nodes: int, switches: int,
                   baseline_s: float) -> SwitchResult:
    """``run_switch`` on a fresh ``cluster``, its overhead against the tasks run unscheduled
    for ``baseline_s`` before the cluster starts and after it stops (the median of their segments)."""
    before = unscheduled_cpu_rates(2 * nodes, baseline_s)
    with cluster as client:
        scheduled = run_switch(client, switches)
    return scheduled.against(before + unscheduled_cpu_rates(2 * nodes, baseline_s))


def run_switch(client: MasterClient, switches: int) -> SwitchResult:
    """Two rows of spinning gangs in each partition's matrix, as wide as its nodes up, for ``switches``
    switches (a switch goes out at each boundary of any partition, so at least every shortest quantum)."""
    run = uuid.uuid4().hex
    listing = client.node_list()
    up = {node.name for node in listing.nodes if node.state == "up"}
    specs = [job_spec(SyntheticJob("spin"), len(up & set(partition.nodes))).model_copy(
                 update={"env": {_MARKER: run}, "partition": partition.name})
             for partition in listing.partitions for _ in range(2)]
    quantum_ms = min(partition.quantum_ms for partition in listing.partitions)
    with running(client, specs, warmup_s=3 * quantum_ms / 1000):
        pids = _task_pids(f"{_MARKER}={run}".encode(), sum(spec.tasks for spec in specs))
        daemons = _daemons(set(pids))
        master_before = client.switch_stats(1)
        before, daemons_before, start = _cpu_s(pids), _cpu_s(daemons), time.monotonic()
        time.sleep(switches * quantum_ms / 1000)
        after, daemons_after, end = _cpu_s(pids), _cpu_s(daemons), time.monotonic()
        stats = client.switch_stats(switches)
    elapsed = end - start
    latencies = sorted(ns / 1e6 for ns in stats.latencies_ns)
    cores = len(os.sched_getaffinity(0))
    return SwitchResult(
        switches=len(latencies),
        partitions=len(listing.partitions),
        median_ms=statistics.median(latencies),
        p99_ms=percentile(latencies, 0.99),
        cpu=100 * (stats.master_cpu_ns - master_before.master_cpu_ns) / 1e9 / elapsed,
        job_cpu_rate=(after - before) / elapsed,
        daemons_pct=100 * (daemons_after - daemons_before) / elapsed / cores if daemons else None,
    )


def _daemons(tasks: set[int]) -> list[int]:
    """A local cluster's daemon processes: this process's descendants (it started the cluster), the
    tasks left out; none for a docker cluster."""
    return [child.pid for child in psutil.Process().children(recursive=True) if child.pid not in tasks]


def split_into_partitions(folder: Path, nodes: int, partitions: int, quantum_ms: int) -> Path:
    """A configuration file in ``folder`` that splits the local cluster's ``nodes`` nodes into ``partitions``
    partitions of one tier, each with a quantum of its own (``quantum_ms`` x 1, 1.25, 1.5, ...)."""
    if nodes % partitions:
        raise ValueError(f"{nodes} nodes do not split into {partitions} partitions of one size")
    size = nodes // partitions
    path = folder / "partitions.toml"
    path.write_text(f'[[nodes]]\nnames = "node[1-{nodes}]"\n' + "".join(
        f'\n[[partitions]]\nname = "p{index + 1}"\nnodes = "node[{index * size + 1}-{(index + 1) * size}]"\n'
        f"quantum_ms = {quantum_ms * (4 + index) // 4}\n" for index in range(partitions)))
    return path


_MARKER = "GANG_BENCH_SWITCH_RUN"  # in the tasks' environment: this run's tasks among all processes
_FIND_S = 30.0


def _task_pids(marker: bytes, count: int) -> list[int]:
    """The processes of this run's tasks (on this host's kernel, containers' included), by ``marker``
    in their environment: each task's command is one process, its launcher having become it."""
    deadline = time.monotonic() + _FIND_S
    while True:
        pids = []
        for entry in os.listdir("/proc"):
            try:
                if entry.isdigit() and marker in open(f"/proc/{entry}/environ", "rb").read().split(b"\0"):
                    pids.append(int(entry))
            except OSError:  # gone, or not ours to read
                continue
        if len(pids) == count:
            return pids
        if time.monotonic() > deadline:
            raise RuntimeError(f"found {len(pids)} processes of the benchmark's tasks, not {count}")
        time.sleep(0.1)


def _cpu_s(pids: list[int]) -> float:
    return sum(process_cpu_ns(pid) for pid in pids) / 1e9
