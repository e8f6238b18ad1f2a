"""`gang bench floor`: the machine's limits the design rests on (docs/limits.md).

* **signals**: SIGSTOP to N spinning processes until the kernel has stopped all of
  them, and SIGCONT until all are continued; with more spinners than cores a process
  stops only when it next gets a CPU, which is why the switch path never waits for it.
* **CPU clocks**: the smallest step of a process's CPU clock, which the node daemon
  reads, against the tick-based counters of /proc (psutil), which it does not.
* **ZeroMQ**: PUB to the last of N SUB processes, with the cores idle and busy, at
  normal priority and at SCHED_FIFO: on busy cores the scheduler's wake-up latency,
  not the messaging, is the cost, which is why the daemons run real-time.
* **quantum**: the job CPU lost to gang scheduling at quanta of 10, 50 and 100 ms
  (`gang bench switch` on a fresh local cluster at each).
"""

import multiprocessing
import os
import signal
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from typing import Any

import psutil
import zmq

from gangsched.bench.switch import measure_switch
from gangsched.daemon.realtime import zmq_context
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import temporary_cluster
from gangsched.noded.task_processes import process_cpu_ns
from gangsched.sim.report import percentile

Row = dict[str, Any]
SPINNER = ["setpriv", "--pdeathsig", "KILL", "--", sys.executable, "-c", "while True: pass"]
FIFO_PRIORITY = 50


def _percentiles(what: str, n: int, values_us: list[float], **labels: str) -> Row:
    ordered = sorted(values_us)
    return {"measure": what, "n": n, **labels, "p50_us": round(statistics.median(ordered), 1),
            "p99_us": round(percentile(ordered, 0.99), 1),
            "max_us": round(ordered[-1], 1)}


@contextmanager
def spinners(count: int) -> Iterator[list[subprocess.Popen[bytes]]]:
    """``count`` processes that burn CPU until killed (by the kernel, too, if this one dies)."""
    processes = [subprocess.Popen(SPINNER) for _ in range(count)]
    try:
        yield processes
    finally:
        for process in processes:
            process.kill()
            process.wait()


def signal_round_trips(counts: list[int], rounds: int) -> list[Row]:
    rows = []
    for count in counts:
        stop_us, cont_us = [], []
        with spinners(count) as processes:
            time.sleep(0.2)  # past the interpreter's start
            for _ in range(rounds):
                start = time.perf_counter()
                for process in processes:
                    os.kill(process.pid, signal.SIGSTOP)
                for process in processes:  # blocks until the kernel has stopped it
                    os.waitid(os.P_PID, process.pid, os.WSTOPPED)
                stopped = time.perf_counter()
                for process in processes:
                    os.kill(process.pid, signal.SIGCONT)
                for process in processes:
                    os.waitid(os.P_PID, process.pid, os.WCONTINUED)
                continued = time.perf_counter()
                stop_us.append((stopped - start) * 1e6)
                cont_us.append((continued - stopped) * 1e6)
                time.sleep(0.002)  # let them run between rounds, as between quanta
        rows.append(_percentiles("SIGSTOP until all stopped", count, stop_us))
        rows.append(_percentiles("SIGCONT until all continued", count, cont_us))
    return rows


def cpu_clock_steps(seconds: float) -> list[Row]:
    """How finely a spinning process's CPU time can be read: its CPU clock while it runs
    (the kernel brings another process's clock up to date at its ticks and context switches)
    and each time it has just been stopped (as the node daemon reads it), and the
    tick-counted times of /proc."""
    with spinners(1) as (process,):
        time.sleep(0.2)

        def after_stop() -> float:
            os.kill(process.pid, signal.SIGCONT)
            time.sleep(0.001)
            os.kill(process.pid, signal.SIGSTOP)
            os.waitid(os.P_PID, process.pid, os.WSTOPPED)
            return process_cpu_ns(process.pid) / 1e3

        readers: dict[str, Callable[[], float]] = {
            "CPU clock step, running": lambda: process_cpu_ns(process.pid) / 1e3,
            "CPU time step, /proc (psutil)": lambda: sum(psutil.Process(process.pid).cpu_times()[:2]) * 1e6,
            "CPU clock step, stopped every ~1 ms": after_stop,  # last: it leaves the spinner stopped
        }
        rows = []
        for what, read in readers.items():
            steps, last, deadline = [], read(), time.monotonic() + seconds
            while time.monotonic() < deadline:
                now = read()
                if now != last:
                    steps.append(now - last)
                    last = now
            rows.append(_percentiles(what, 1, steps))
    return rows


def _subscriber(endpoint: str, fifo: bool, results: Connection) -> None:
    socket = zmq_context(FIFO_PRIORITY if fifo else None).socket(zmq.SUB)
    socket.setsockopt(zmq.SUBSCRIBE, b"")
    socket.connect(endpoint)
    latencies: dict[int, int] = {}
    while True:
        sequence, sent_ns = map(int, socket.recv().split())
        received = time.monotonic_ns()
        if sequence < 0:  # a probe: the subscription has reached the publisher
            results.send("ready")
            continue
        if sequence == 0:  # the end
            break
        latencies[sequence] = received - sent_ns
    results.send(latencies)


@contextmanager
def fifo_priority(wanted: bool) -> Iterator[None]:
    """SCHED_FIFO for this process (and the processes it forks) while inside, as the daemons run."""
    before = os.sched_getscheduler(0), os.sched_getparam(0)
    if wanted:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(FIFO_PRIORITY))
    try:
        yield
    finally:
        os.sched_setscheduler(0, *before)


def pub_sub_latency(counts: list[int], messages: int, busy: bool, fifo: bool) -> list[Row]:
    """From the send to the last of N subscribers having the message, over loopback TCP."""
    rows = []
    labels = {"cores": "busy" if busy else "idle", "priority": "fifo" if fifo else "normal"}
    forking = multiprocessing.get_context("fork")
    with spinners((os.cpu_count() or 1) if busy else 0), fifo_priority(fifo):
        for count in counts:
            context = zmq_context(FIFO_PRIORITY if fifo else None)  # its I/O thread too, as the daemons'
            publisher = context.socket(zmq.PUB)
            port = publisher.bind_to_random_port("tcp://127.0.0.1")
            pipes, processes = [], []
            for _ in range(count):
                ours, theirs = forking.Pipe()
                process = forking.Process(target=_subscriber, args=(f"tcp://127.0.0.1:{port}", fifo, theirs),
                                          daemon=True)
                process.start()
                pipes.append(ours)
                processes.append(process)
            waiting = set(range(count))
            while waiting:  # probe until every subscription has arrived (ZeroMQ's slow joiner)
                publisher.send(f"-1 {time.monotonic_ns()}".encode())
                waiting = {index for index in waiting if not pipes[index].poll(0.01)}
            for sequence in range(1, messages + 1):
                publisher.send(f"{sequence} {time.monotonic_ns()}".encode())
                time.sleep(0.002)
            publisher.send(b"0 0")
            received = []
            for pipe in pipes:
                while (got := pipe.recv()) == "ready":
                    pass
                received.append(got)
            for process in processes:
                process.join()
            context.destroy(linger=0)
            last = [max(each[sequence] for each in received) / 1e3 for sequence in range(1, messages + 1)
                    if all(sequence in each for each in received)]
            rows.append(_percentiles("ZeroMQ PUB to last SUB", count, last, **labels))
    return rows


def fifo_allowed() -> bool:
    try:
        with fifo_priority(True):
            return True
    except PermissionError:
        return False


def quantum_costs(quanta_ms: list[int], seconds: float, baseline_s: float, nodes: int) -> list[Row]:
    rows = []
    for quantum_ms in quanta_ms:
        config = ClusterConfig(nodes=nodes, quantum_ms=quantum_ms)
        switches = max(10, int(seconds * 1000 / quantum_ms))
        result = measure_switch(temporary_cluster(config), nodes, switches, baseline_s)
        rows.append({"measure": "job CPU lost to scheduling", "n": nodes, "quantum_ms": quantum_ms,
                     "lost_pct": round(result.overhead_pct or 0.0, 2), "master_cpu_pct": round(result.cpu, 2),
                     "daemons_pct": round(result.daemons_pct or 0.0, 2),
                     "switch_p50_us": round(result.median_ms * 1e3, 1), "switch_p99_us": round(result.p99_ms * 1e3, 1)})
    return rows
