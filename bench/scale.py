"""`gang bench scale`: a real master and N emulated node daemons (``scale_agents``: real daemons
with emulated tasks, in one process per core), a matrix of MPL 5 filled with jobs of many
widths, and per N what the master spends and what a switch weighs and takes.

The master relays as it is told (``--relay-fanout``, its own default unless given); each
row counts the nodes homed at a relay. Per N, one row: the switch's bytes as a node
receives them (a subscriber of the bench's own counts every frame), the master's CPU over
the window as a share of one core (and the share of its ZeroMQ I/O thread) and its
resident memory, the mean time of one read of the node messages and of one quantum
boundary (the master's own histograms), the time for all N to register, and the switch
latency (send to the last node having applied it) at its median and 99th percentile over
the switches every node reported, and the emulated nodes' own CPU: where that process uses
a whole core, the latency measures the emulation, not the master.
"""

import contextlib
import getpass
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil
import zmq

from gangsched.client.master_client import MasterClient, MasterUnreachable
from gangsched.protocol.messages import MasterStats
from gangsched.protocol.records import JobSpec, NodeState

MPL = 5
_REGISTER_S = 300.0
# a thousand emulated nodes need more than the core their process has: their heartbeats and
# reports can lag by seconds, which must not get them declared lost (6 s of silence here)
_HEARTBEAT_MS = 2000


@dataclass(frozen=True)
class ScaleRow:
    nodes: int
    relayed: int  # nodes homed at a relay, not at the master
    jobs: int
    register_s: float
    switch_bytes: int
    master_cpu_pct: float
    master_io_cpu_pct: float  # ... of it in ZeroMQ's I/O thread: sending the switches, receiving the reports
    master_rss_mb: float
    report_drain_ms: float
    decide_ms: float
    switch_p50_ms: float
    switch_p99_ms: float
    switches: int  # in the window
    complete: int  # ... that every node reported
    agents_cpu_pct: float  # the emulated nodes' process, % of a core: at 100 it cannot keep up


def widths(nodes: int) -> list[int]:
    """Jobs of many widths filling MPL rows of ``nodes`` columns: halves, quarters, ... down to 1."""
    row, width, left = [], nodes // 2, nodes
    while left:
        width = max(1, min(width, left))
        row.append(width)
        left -= width
        width //= 2
    return row * MPL


def measure_scale(nodes: int, quantum_ms: int, seconds: float, relay_fanout: int | None = None) -> ScaleRow:
    with emulated_cluster(nodes, quantum_ms, ["--policy", "gs", "--mpl", str(MPL), *(
            [] if relay_fanout is None else ["--relay-fanout", str(relay_fanout)])]) as cluster:
        relayed = sum(node.via is not None for node in cluster.client.nodes())
        return _measure(cluster.client, f"ipc://{cluster.work}/switch.sock", nodes, relayed, cluster.register_s,
                        seconds, psutil.Process(cluster.master.pid),
                        [psutil.Process(process.pid) for process in cluster.agents])


@dataclass
class EmulatedCluster:
    client: MasterClient
    work: Path  # the master's state is in work/master
    master: "subprocess.Popen[bytes]"
    agents: "list[subprocess.Popen[bytes]]"
    register_s: float  # for every node to register


@contextlib.contextmanager
def emulated_cluster(nodes: int, quantum_ms: int, master_options: Sequence[str] = (),
                     instant_tasks: bool = False) -> Iterator[EmulatedCluster]:
    """A real master in a temporary folder and ``nodes`` emulated node daemons (one process of them a
    core), every node registered; all of it stopped after."""
    with tempfile.TemporaryDirectory(prefix="gang-scale-") as folder:
        work = Path(folder)
        endpoint = f"ipc://{work}/master.sock"
        master = _start([
            "master", "--bind", endpoint, "--switch-bind", f"ipc://{work}/switch.sock",
            "--report-bind", f"ipc://{work}/report.sock", "--state-dir", str(work / "master"),
            "--quantum-ms", str(quantum_ms), "--heartbeat-ms", str(_HEARTBEAT_MS),
            "--log-file", str(work / "master.log"), *master_options])
        agents: list[subprocess.Popen[bytes]] = []
        try:
            with MasterClient(endpoint, timeout_s=30) as client:
                _wait(lambda: client.stats() is not None, 30, "the master")
                began = time.monotonic()
                # one process of emulated nodes per core: real nodes apply a switch in parallel
                processes = min(nodes, psutil.cpu_count() or 1)
                for first, count in _shares(nodes, processes):
                    agents.append(subprocess.Popen([
                        sys.executable, "-m", "gangsched.bench.scale_agents", "--master", endpoint,
                        "--first", str(first), "--count", str(count), "--spool", str(work / "agents"),
                        *(["--instant-tasks"] if instant_tasks else [])]))
                _wait(lambda: sum(node.state is NodeState.UP for node in client.nodes()) == nodes, _REGISTER_S,
                      f"{nodes} agents to register", agents)
                yield EmulatedCluster(client, work, master, agents, time.monotonic() - began)
        finally:
            for process in [*agents, master]:
                process.send_signal(signal.SIGTERM)
                process.wait(timeout=60)


def _shares(nodes: int, processes: int) -> list[tuple[int, int]]:
    """``nodes`` split as evenly as can be among ``processes``: (first index, count) each."""
    bounds = [nodes * index // processes for index in range(processes + 1)]
    return [(low, high - low) for low, high in zip(bounds, bounds[1:])]


def _measure(client: MasterClient, switches: str, nodes: int, relayed: int, register_s: float, seconds: float,
             master: psutil.Process, agents: list[psutil.Process]) -> ScaleRow:
    job_ids = [client.submit(JobSpec(name=f"w{width}", user=_user(), tasks=width, argv=["true"]))
               for width in widths(nodes)]
    client.wait_until_running(job_ids, timeout_s=120)
    listener: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
    listener.setsockopt(zmq.SUBSCRIBE, b"")
    listener.connect(switches)
    try:
        listener.poll(5000)  # the subscription takes a moment to reach the master
        before, started, agents_before, io_before = client.stats(), time.monotonic(), _cpu_s(agents), _io_cpu_s(master)
        sizes = []
        while time.monotonic() < started + seconds:
            if listener.poll(100):
                sizes.append(len(listener.recv()))
        after, window, agents_after, io_after = (
            client.stats(),
            time.monotonic() - started,
            _cpu_s(agents),
            _io_cpu_s(master),
        )
    finally:
        listener.close()
    latencies = sorted(client.switch_stats(max(1, after.quanta - before.quanta)).latencies_ns)
    for job_id in job_ids:
        client.cancel(job_id, _user())
    _wait(lambda: all(job.state.is_final for job in client.jobs(job_ids)), 60, "every job to end")
    return ScaleRow(
        nodes=nodes, relayed=relayed, jobs=len(job_ids), register_s=round(register_s, 2),
        switch_bytes=max(sizes, default=0),
        master_cpu_pct=round(100 * (after.cpu_s - before.cpu_s) / window, 1),
        master_io_cpu_pct=round(100 * (io_after - io_before) / window, 1),
        master_rss_mb=round(after.resident_bytes / 2**20, 1),
        report_drain_ms=_mean_ms(before, after, "report_drain"),
        decide_ms=_mean_ms(before, after, "quantum_decision"),
        switch_p50_ms=_percentile_ms(latencies, 0.5), switch_p99_ms=_percentile_ms(latencies, 0.99),
        switches=after.quanta - before.quanta, complete=len(latencies),
        agents_cpu_pct=round(100 * (agents_after - agents_before) / window, 1),
    )


def _cpu_s(processes: list[psutil.Process]) -> float:
    return float(sum(times.user + times.system for times in (process.cpu_times() for process in processes)))


def _io_cpu_s(process: psutil.Process) -> float:
    """The CPU time of ``process``'s ZeroMQ I/O threads (named ZMQbg/IO/N)."""
    total = 0.0
    for thread in process.threads():
        name = Path(f"/proc/{process.pid}/task/{thread.id}/comm").read_text().strip()
        if name.startswith("ZMQbg/IO"):
            total += thread.user_time + thread.system_time
    return total


def _mean_ms(before: MasterStats, after: MasterStats, name: str) -> float:
    first, last = getattr(before, name), getattr(after, name)
    count = sum(last.counts) - sum(first.counts)
    return round(1000 * (last.total_s - first.total_s) / count, 3) if count else 0.0


def _percentile_ms(ordered: list[int], share: float) -> float:
    return round(ordered[min(len(ordered) - 1, int(share * len(ordered)))] / 1e6, 2) if ordered else 0.0


def _start(arguments: list[str]) -> "subprocess.Popen[bytes]":
    return subprocess.Popen([sys.executable, "-m", "gangsched.cli", *arguments])


def _user() -> str:
    return getpass.getuser()


def _wait(ready: Callable[[], object], timeout_s: float, what: str,
          processes: "Sequence[subprocess.Popen[bytes]]" = ()) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        for process in processes:
            if process.poll() is not None:
                raise RuntimeError(f"emulated nodes exited ({process.returncode}) before {what}")
        try:
            if ready():
                return
        except MasterUnreachable:  # not up yet
            pass
        time.sleep(0.1)
    raise TimeoutError(f"waited {timeout_s:g} s for {what}")


def write_plot(rows: list[ScaleRow], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    figures = [("switch_bytes", "switch bytes per node"), ("master_cpu_pct", "master CPU, % of a core"),
               ("master_io_cpu_pct", "of it, ZeroMQ's I/O thread, %"),
               ("master_rss_mb", "master resident MB"), ("report_drain_ms", "one read of node messages, ms"),
               ("decide_ms", "one quantum boundary, ms"), ("switch_p99_ms", "switch latency p99, ms"),
               ("register_s", "all nodes registered, s"), ("agents_cpu_pct", "the emulated nodes' CPU, % of a core")]
    # both axes logarithmic, beside a line that grows as the nodes do from the first point: a figure
    # whose points stay on or below it grows no worse than linearly
    figure, axes = plt.subplots(3, 3, figsize=(13, 10))
    for axis, (field, title) in zip(axes.flat, figures):
        points = [(row.nodes, getattr(row, field)) for row in rows if getattr(row, field) > 0]
        if points:
            (first_nodes, first_value), last_nodes = points[0], points[-1][0]
            axis.plot([first_nodes, last_nodes], [first_value, first_value * last_nodes / first_nodes],
                      linestyle="--", color="grey", label="linear in the nodes")
            axis.plot(*zip(*points), marker="o", label="measured")
        axis.set_xscale("log", base=2)
        axis.set_yscale("log")
        axis.set_title(title)
        axis.set_xlabel("nodes")
    axes.flat[0].legend()
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)
