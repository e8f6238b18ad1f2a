"""Switch latency and scheduling overhead (docs/limits.md).

While every node runs busy tasks in two rows, each switch's latency is the
time from the master's send to the last node having sent its signals. The
overhead is the job CPU time lost against the same tasks run unscheduled
for the same wall time (measured first, with no daemon running).
"""

import dataclasses
import statistics
import subprocess
import sys
import time
from contextlib import AbstractContextManager
from dataclasses import dataclass

from gangsched.bench.mix import job_spec, running
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.master.client import MasterClient
from gangsched.noded.tasks import process_cpu_ns
from gangsched.sim.report import percentile

# the spinning program, started here with no node daemon; the kernel kills the spinners
# when the benchmark dies, however it ends, even while they are stopped
SPIN = ["setpriv", "--pdeathsig", "KILL", "--", sys.executable, *SyntheticJob("spin").argv()[1:]]


@dataclass(frozen=True)
class SwitchResult:
    switches: int
    median_ms: float
    p99_ms: float
    cpu: float  # the master's CPU, % of one core
    job_cpu_rate: float  # CPU seconds per second the scheduled tasks got
    overhead_pct: float | None = None  # once set beside the unscheduled rate

    def against(self, baselines: list[float]) -> "SwitchResult":
        """With the overhead against the mean of the unscheduled rates measured."""
        baseline = statistics.fmean(baselines)
        return dataclasses.replace(self, overhead_pct=100 * (1 - self.job_cpu_rate / baseline))


def unscheduled_cpu_rate(tasks: int, seconds: float) -> float:
    """CPU seconds per wall second that ``tasks`` spinning processes get on their own."""
    processes = [subprocess.Popen(SPIN) for _ in range(tasks)]
    try:
        time.sleep(1.0)  # past their start-up
        before, start = _cpu(processes), time.monotonic()
        time.sleep(seconds)
        return (_cpu(processes) - before) / (time.monotonic() - start)
    finally:
        for process in processes:
            process.kill()
            process.wait()


def _cpu(processes: list[subprocess.Popen[bytes]]) -> float:
    return sum(process_cpu_ns(process.pid) for process in processes) / 1e9


def measure_switch(cluster: AbstractContextManager[MasterClient], nodes: int, switches: int, quantum_ms: int,
                   baseline_s: float) -> SwitchResult:
    """``run_switch`` on a fresh ``cluster``, its overhead against the tasks run unscheduled
    for ``baseline_s`` before the cluster starts and after it stops."""
    before = unscheduled_cpu_rate(2 * nodes, baseline_s)
    with cluster as client:
        scheduled = run_switch(client, nodes, switches, quantum_ms)
    return scheduled.against([before, unscheduled_cpu_rate(2 * nodes, baseline_s)])


def run_switch(client: MasterClient, nodes: int, switches: int, quantum_ms: int) -> SwitchResult:
    spec = job_spec(SyntheticJob("spin"), nodes)
    with running(client, [spec, spec], warmup_s=3 * quantum_ms / 1000) as job_ids:
        before, start = _job_cpu_after_switch(client, job_ids)
        master_before = client.switch_stats(1)
        time.sleep(switches * quantum_ms / 1000)
        after, end = _job_cpu_after_switch(client, job_ids)
        stats = client.switch_stats(switches)
    elapsed = end - start
    latencies = sorted(ns / 1e6 for ns in stats.latencies_ns)
    scheduled = (after - before) / elapsed
    return SwitchResult(
        switches=len(latencies),
        median_ms=statistics.median(latencies),
        p99_ms=percentile(latencies, 0.99),
        cpu=100 * (stats.master_cpu_ns - master_before.master_cpu_ns) / 1e9 / elapsed,
        job_cpu_rate=scheduled,
    )


def _job_cpu_after_switch(client: MasterClient, job_ids: list[int]) -> tuple[float, float]:
    """The jobs' CPU time, and when, read at the same point of a quantum at both ends.

    The master learns a task's CPU time from the node's report after each switch, and
    reads the reports just before the next switch, so a reading at a random moment
    lags by one to two quanta: about ±0.1 % of the overhead over a 100 s run. Read
    just after a switch, it counts up to the switch before at both ends, and the
    interval between the readings covers whole quanta.
    """
    quantum = client.matrix().quantum
    while client.matrix().quantum == quantum:
        time.sleep(0.002)
    return sum(job.cpu_s for job in client.jobs(job_ids)), time.monotonic()
