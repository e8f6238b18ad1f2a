"""The synthetic programs of Wiseman & Feitelson 2003 (its Fig. 6 and §4.2.3), run as the tasks of a job.

``compute``, ``io`` and ``mixed``: N iterations of compute (``--compute-ms`` of
this process's CPU time, so a stopped task does not "finish" its work by the
clock), then ``--io-writes`` synchronous writes of ``--io-bytes`` bytes to the
I/O server, then a blocking wait of ``--wait-ms`` (communication or I/O on a
device of its own: like such I/O, it goes on while the task is stopped), then
a barrier. The wait sets a compute job's utilization without I/O contention. ``phased``: ``--phases`` short I/O phases
alternating with longer compute phases, then a long I/O phase (QCRD-like).
``timed``: each iteration is ``--run-ms`` of time runnable (not stopped) spent
asleep, then a barrier: a job of a given run time whose progress follows its
quanta and not the CPU contention of emulated nodes (``gang replay``). Its
run time counts from its launch, as a real program's would: the time the
interpreter took to start is taken off the first iteration.
``spin``: pure CPU, no barrier, for overhead benchmarks. ``--iterations 0``
runs until the task is ended.

Every kind but ``spin`` can migrate: its state is the iterations done, saved
at a barrier and taken back on restart (jobs/runtime.py ``on_checkpoint``).

Usage: python -m gangsched.jobs.synthetic KIND [options]
"""

import argparse
import itertools
import os
import time
from collections.abc import Iterator
from dataclasses import dataclass

from gangsched.jobs.runtime import barrier, io_write, on_checkpoint, progress, restored

KINDS = ("compute", "io", "mixed", "phased", "timed", "spin")
_SLEEP_STEP_S = 0.005


@dataclass(frozen=True)
class SyntheticJob:
    """The program's parameters, and the command that runs it on a node."""

    kind: str
    iterations: int = 0
    compute_ms: float = 10.0
    io_writes: int = 20
    io_bytes: int = 8193
    wait_ms: float = 0.0
    phases: int = 12
    phase_iterations: int = 20
    run_ms: float = 100.0

    @property
    def migratable(self) -> bool:
        return self.kind != "spin"

    def argv(self) -> list[str]:
        # python3 is the node daemon's own interpreter: it puts its folder first on PATH
        return [
            "python3", "-m", "gangsched.jobs.synthetic", self.kind,
            "--iterations", str(self.iterations), "--compute-ms", str(self.compute_ms),
            "--io-writes", str(self.io_writes), "--io-bytes", str(self.io_bytes),
            "--wait-ms", str(self.wait_ms), "--phases", str(self.phases),
            "--phase-iterations", str(self.phase_iterations), "--run-ms", str(self.run_ms),
        ]


def burn_cpu(cpu_ms: float) -> None:
    """Use ``cpu_ms`` of this thread's CPU time, however long that takes on the clock."""
    target = time.thread_time_ns() + int(cpu_ms * 1e6)
    while time.thread_time_ns() < target:
        for _ in range(2000):
            pass


def run_for(run_ms: float) -> None:
    """Spend ``run_ms`` of runnable time asleep: time spent stopped does not count.

    A step that took much longer than asked was cut by a stop: it counts as two
    steps at most, so a stop costs this one short step of error at most.
    """
    left = run_ms / 1000
    while left > 0:
        step = min(left, _SLEEP_STEP_S)
        began = time.monotonic()
        time.sleep(step)
        left -= min(time.monotonic() - began, 2 * step)


def seconds_since_launch() -> float:
    """Since the kernel started this process (clock ticks since boot, /proc/self/stat field 22)."""
    with open("/proc/self/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    started = int(fields[19]) / os.sysconf("SC_CLK_TCK")
    return max(0.0, time.clock_gettime(time.CLOCK_BOOTTIME) - started)


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m gangsched.jobs.synthetic")
    parser.add_argument("kind", choices=KINDS)
    parser.add_argument("--iterations", type=int, default=250, help="barriers to pass; 0: forever")
    parser.add_argument("--compute-ms", type=float, default=10.0, help="CPU ms per iteration")
    parser.add_argument("--io-writes", type=int, default=20, help="writes per iteration")
    parser.add_argument("--io-bytes", type=int, default=8193, help="bytes per write")
    parser.add_argument("--wait-ms", type=float, default=0.0, help="blocking wait per iteration")
    parser.add_argument("--phases", type=int, default=12, help="phased: compute phases")
    parser.add_argument("--phase-iterations", type=int, default=20, help="phased: iterations of a compute phase")
    parser.add_argument("--run-ms", type=float, default=100.0, help="timed: runnable ms per iteration")
    return parser.parse_args(argv)


def _iterations(count: int) -> Iterator[int]:
    return itertools.count(1) if count == 0 else iter(range(1, count + 1))


def _phases(args: argparse.Namespace) -> Iterator[tuple[float, int]]:
    """(compute ms, I/O writes) of each iteration of a phased job."""
    short_io = max(1, args.phase_iterations // 2)
    for _ in range(args.phases):
        yield from [(0.0, args.io_writes)] * short_io
        yield from [(args.compute_ms, 0)] * args.phase_iterations
    yield from [(0.0, args.io_writes)] * (args.phase_iterations * 2)


def _steps(args: argparse.Namespace) -> Iterator[tuple[float, int]]:
    if args.kind == "phased":
        return _phases(args)
    compute = args.compute_ms if args.kind in ("compute", "mixed") else 0.0
    writes = args.io_writes if args.kind in ("io", "mixed") else 0
    return ((compute, writes) for _ in _iterations(args.iterations))


class _Done:
    """The iterations passed: the whole state a synthetic task migrates with."""

    count = 0

    @classmethod
    def save(cls) -> bytes:
        return str(cls.count).encode()


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.kind == "spin":
        while True:
            burn_cpu(1000)
    on_checkpoint(_Done.save)
    state = restored()
    done = int(state) if state else 0
    block = bytes(args.io_bytes)
    launch_ms = seconds_since_launch() * 1000 if args.kind == "timed" and not done else 0.0
    for count, (compute_ms, writes) in enumerate(itertools.islice(_steps(args), done, None), start=done + 1):
        burn_cpu(compute_ms)
        for _ in range(writes):
            io_write(block)
        if args.wait_ms:
            time.sleep(args.wait_ms / 1000)
        if args.kind == "timed":
            run_for(args.run_ms - launch_ms)
            launch_ms = max(0.0, launch_ms - args.run_ms)
        _Done.count = count - 1  # a checkpoint at this barrier resumes with this iteration's barrier
        barrier()
        _Done.count = count
        progress(count)


if __name__ == "__main__":
    main()
