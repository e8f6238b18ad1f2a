"""`gang bench slurm`: Slurm's commands under their names (docs/slurm.md) as whole processes, side by side
with a real Slurm's where one is given (its ``SLURM_CONF``): ``sbatch`` beside ``gang submit`` and the bare
interpreter; ``squeue`` and ``sacct -X`` of one job; ``squeue -r`` of ten thousand held array jobs; and ten
arrays of a thousand ``/bin/true`` through ``sbatch``, beside ``gang submit -a``.

Each cluster runs the arrays alone: gangsched's, then Slurm's (fewer of them: its rate is a few jobs a
second, docs/limits.md)."""

import os
import subprocess
import sys
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
