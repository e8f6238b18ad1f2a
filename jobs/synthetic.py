"""The synthetic programs of seed 003 (SPEC §7.1, §7.2), run as the tasks of a job.

``compute``, ``io`` and ``mixed``: N iterations of compute (``--compute-ms`` of
this process's CPU time, so a stopped task does not "finish" its work by the
clock), then ``--io-writes`` synchronous writes of ``--io-bytes`` bytes to the
I/O server, then a blocking wait of ``--wait-ms`` (communication or I/O on a
device of its own: like such I/O, it goes on while the task is stopped), then
a barrier. The wait sets a compute job's utilization without I/O contention. ``phased``: ``--phases`` short I/O phases
alternating with longer compute phases, then a long I/O phase (QCRD-like).
``spin``: pure CPU, no barrier, for overhead benchmarks. ``--iterations 0``
runs until the task is ended.

Usage: python -m gangsched.jobs.synthetic KIND [options]
"""

import argparse
import itertools
import time
from collections.abc import Iterator
from dataclasses import dataclass

from gangsched.jobs.runtime import barrier, io_write, progress

KINDS = ("compute", "io", "mixed", "phased", "spin")


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

    def argv(self) -> list[str]:
        # python3 is the node daemon's own interpreter: it puts its folder first on PATH
        return [
            "python3", "-m", "gangsched.jobs.synthetic", self.kind,
            "--iterations", str(self.iterations), "--compute-ms", str(self.compute_ms),
            "--io-writes", str(self.io_writes), "--io-bytes", str(self.io_bytes),
            "--wait-ms", str(self.wait_ms), "--phases", str(self.phases),
            "--phase-iterations", str(self.phase_iterations),
        ]


def burn_cpu(cpu_ms: float) -> None:
    """Use ``cpu_ms`` of this thread's CPU time, however long that takes on the clock."""
    target = time.thread_time_ns() + int(cpu_ms * 1e6)
    while time.thread_time_ns() < target:
        for _ in range(2000):
            pass


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


def main(argv: list[str] | None = None) -> None:
    args = parse(argv)
    if args.kind == "spin":
        while True:
            burn_cpu(1000)
    block = bytes(args.io_bytes)
    for count, (compute_ms, writes) in enumerate(_steps(args), start=1):
        burn_cpu(compute_ms)
        for _ in range(writes):
            io_write(block)
        if args.wait_ms:
            time.sleep(args.wait_ms / 1000)
        barrier()
        progress(count)


if __name__ == "__main__":
    main()
