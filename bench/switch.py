"""Switch latency and scheduling overhead (MEASUREMENTS.md §5).

While every node runs busy tasks in two rows, each switch's latency is the
time from the master's send to the last node having sent its signals. The
overhead is the job CPU time lost against the same tasks run unscheduled
for the same wall time (measured first, with no daemon running).
"""

import getpass
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass

import psutil

from gangsched.bench.mix import wait_until_running
from gangsched.master.client import MasterClient
from gangsched.protocol.messages import JobSpec

SPIN = [sys.executable, "-m", "gangsched.jobs.synthetic", "spin"]
SPIN_JOB = ["python3", "-m", "gangsched.jobs.synthetic", "spin"]


@dataclass(frozen=True)
class SwitchResult:
    switches: int
    median_ms: float
    p99_ms: float
    cpu: float  # the master's CPU, % of one core
    overhead_pct: float


def unscheduled_cpu_rate(tasks: int, seconds: float) -> float:
    """CPU seconds per wall second that ``tasks`` spinning processes get on their own."""
    processes = [subprocess.Popen(SPIN) for _ in range(tasks)]
    try:
        time.sleep(1.0)  # past their start-up
        handles = [psutil.Process(p.pid) for p in processes]
        before, start = _cpu(handles), time.monotonic()
        time.sleep(seconds)
        return (_cpu(handles) - before) / (time.monotonic() - start)
    finally:
        for process in processes:
            process.kill()
            process.wait()


def _cpu(handles: list[psutil.Process]) -> float:
    return sum(sum(handle.cpu_times()[:2]) for handle in handles)


def run_switch(client: MasterClient, nodes: int, switches: int, quantum_ms: int, baseline: float) -> SwitchResult:
    spec = JobSpec(name="bench-spin", user=getpass.getuser(), nodes=nodes, argv=SPIN_JOB)
    job_ids = [client.submit(spec), client.submit(spec)]
    try:
        wait_until_running(client, job_ids, timeout_s=60)
        time.sleep(3 * quantum_ms / 1000)
        before, master_before, start = _job_cpu(client, job_ids), client.switch_stats(1), time.monotonic()
        time.sleep(switches * quantum_ms / 1000)
        after, stats, elapsed = _job_cpu(client, job_ids), client.switch_stats(switches), time.monotonic() - start
    finally:
        for job_id in job_ids:
            client.cancel(job_id, getpass.getuser())
    latencies = sorted(ns / 1e6 for ns in stats.latencies_ns)
    scheduled = (after - before) / elapsed
    return SwitchResult(
        switches=len(latencies),
        median_ms=statistics.median(latencies),
        p99_ms=latencies[min(len(latencies) - 1, int(0.99 * len(latencies)))],
        cpu=100 * (stats.master_cpu_ns - master_before.master_cpu_ns) / 1e9 / elapsed,
        overhead_pct=100 * (1 - scheduled / baseline),
    )


def _job_cpu(client: MasterClient, job_ids: list[int]) -> float:
    return sum(job.cpu_s for job in client.jobs(job_ids))
