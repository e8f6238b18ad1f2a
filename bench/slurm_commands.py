"""`gang bench slurm`: Slurm's commands under their names (docs/slurm.md) as whole processes, side by side
with a real Slurm's where one is given (its ``SLURM_CONF``): ``sbatch`` beside ``gang submit`` and the bare
interpreter; ``squeue`` and ``sacct -X`` of one job; ``squeue -r`` of ten thousand held array jobs; and ten
arrays of a thousand ``/bin/true`` through ``sbatch``, beside ``gang submit -a``; and ``srun -n 4 true`` as
steps inside a batch job of 2 nodes x 2, one at a time and a hundred in a row.

Each cluster runs the arrays alone: gangsched's, then Slurm's (fewer of them: its rate is a few jobs a
second, docs/limits.md)."""

import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from gangsched.bench.cli_latency import whole_process_ms

SLURM_BIN = Path("/usr/bin")  # Debian's slurm-client
ARRAY = "0-999"


class Peer:
    """A real Slurm's commands, with its configuration."""

    def __init__(self, conf: Path) -> None:
        self.environment = {**os.environ, "SLURM_CONF": str(conf)}

    def run(self, *command: str) -> str:
        done = subprocess.run([str(SLURM_BIN / command[0]), *command[1:]], env=self.environment,
                              capture_output=True, text=True, check=True)
        return done.stdout

    def command(self, name: str) -> list[str]:
        return [str(SLURM_BIN / name)]


def _submitted(output: str) -> int:
    return int(output.strip().split(";")[0].split()[-1])


def latencies(ours: Path, environment: dict[str, str], peer: Peer | None, runs: int,
              job_id: int, peer_job: int | None) -> list[dict[str, Any]]:
    """The median whole-process time of each command, ours and the peer's, in one run."""
    rows = [whole_process_ms("python -I -S -c pass", [sys.executable, "-I", "-S", "-c", "pass"], environment, runs),
            whole_process_ms("gang submit -n 1 -- true", [str(Path(sys.executable).with_name("gang")), "submit",
                                                          "-n", "1", "--", "true"], environment, runs)]
    commands = [("sbatch --wrap=true", ["sbatch", "-o", "/dev/null", "--wrap=true"]),
                ("squeue -j JOB", ["squeue", "-j", "{job}"]), ("sacct -X -j JOB", ["sacct", "-X", "-j", "{job}"])]
    for name, command in commands:
        rows.append(whole_process_ms(f"gangsched {name}", [str(ours / command[0]),
                                                           *[word.format(job=job_id) for word in command[1:]]],
                                     environment, runs))
        if peer is not None and peer_job is not None and command[0] != "sacct":  # no accounting on the peer
            rows.append(whole_process_ms(f"Slurm {name}", [*peer.command(command[0]),
                                                          *[word.format(job=peer_job) for word in command[1:]]],
                                         peer.environment, runs))
    return rows


def held_listing(ours: Path, environment: dict[str, str], peer: Peer | None, arrays: int,
                 runs: int) -> list[dict[str, Any]]:
    """``squeue -r`` with ``arrays`` held arrays of a thousand pending, ours and the peer's; cancelled after."""
    rows = []
    sides: list[tuple[str, Callable[..., str], list[str], dict[str, str]]] = [
        ("gangsched", lambda *words: _run([str(ours / words[0]), *words[1:]], environment),
         [str(ours / "squeue")], environment)]
    if peer is not None:
        sides.append(("Slurm", peer.run, peer.command("squeue"), peer.environment))
    for name, run, squeue, side_environment in sides:
        ids = [_submitted(run("sbatch", "--parsable", "-H", f"--array={ARRAY}", "--wrap=true"))
               for _ in range(arrays)]
        listed = len(run("squeue", "-r", "-h").splitlines())
        row = whole_process_ms(f"{name} squeue -r ({listed} pending)", [*squeue, "-r"], side_environment, runs)
        rows.append(row)
        run("scancel", *map(str, ids))
    return rows


def array_rate(submit: Callable[[], object], active: Callable[[], int], jobs: int, name: str) -> dict[str, Any]:
    """Jobs a second from the first submission to the last job's end."""
    start = time.perf_counter()
    submit()
    while active():
        time.sleep(0.2)
    seconds = time.perf_counter() - start
    return {"command": name, "jobs": jobs, "seconds": round(seconds, 1), "jobs_per_s": round(jobs / seconds, 1)}


def _run(command: list[str], environment: dict[str, str]) -> str:
    return subprocess.run(command, env=environment, capture_output=True, text=True, check=True).stdout


# timed inside the allocation by the script itself (date's nanoseconds), the same for both clusters
STEPS_SCRIPT = """#!/bin/sh
now() {{ date +%s%N; }}
for i in $(seq {runs}); do start=$(now); srun -n 4 true; echo "step $(( ($(now) - start) / 1000 ))"; done
start=$(now); for i in $(seq {row}); do srun -n 4 true; done; echo "row $(( ($(now) - start) / 1000 ))"
"""


def step_figures(ours: Path, environment: dict[str, str], peer: Peer | None, runs: int,
                 row: int) -> list[dict[str, Any]]:
    """A batch job of 2 nodes x 2 on each cluster whose script times ``srun -n 4 true`` ``runs`` times, from
    its start to its exit (median and p99), then ``row`` such steps in a row (steps a second)."""
    script = STEPS_SCRIPT.format(runs=runs, row=row)
    sides: list[tuple[str, list[str], dict[str, str]]] = [("gangsched", [str(ours / "sbatch")], environment)]
    if peer is not None:
        sides.append(("Slurm", peer.command("sbatch"), peer.environment))
    rows = []
    for name, sbatch, side_environment in sides:
        with tempfile.TemporaryDirectory(prefix="gang-bench-steps-") as folder:
            output = Path(folder) / "steps.out"
            subprocess.run([*sbatch, "--wait", "-N", "2", "-n", "4", "-t", "30", "-o", str(output)],
                           input=script, env=side_environment, cwd=folder, check=True, capture_output=True,
                           text=True)
            words = [line.split() for line in output.read_text().splitlines()]
        steps = sorted(int(value) / 1000 for kind, value in words if kind == "step")
        (took,) = [int(value) / 1e6 for kind, value in words if kind == "row"]
        rows.append({"cluster": name, "steps": len(steps), "median_ms": round(statistics.median(steps), 1),
                     "p99_ms": round(steps[min(len(steps) - 1, round(0.99 * (len(steps) - 1)))], 1),
                     "row_of": row, "steps_per_s": round(row / took, 1)})
    return rows
