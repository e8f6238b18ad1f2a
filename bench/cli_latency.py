"""`gang bench cli`: how long `gang` commands take as whole processes, as a user or a script
running them in a loop sees it (interpreter start, imports, the request, the output).

As installed, Python keeps the compiled bytecode of every module: the commands run with
bytecode writing on (whatever PYTHONDONTWRITEBYTECODE says here) and once untimed first."""

import os
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

# each as its own `gang` process; a job command asks the cluster the benchmark started
SUBMIT = ("submit", "-n", "1", "--", "true")
COMMANDS = (("--help",), ("queue",), ("queue", "--all"), ("nodes",), ("matrix",), SUBMIT, ("sim", "--help"))
FLOOR = "python -c pass"  # the interpreter alone, the first row: what no command can go below


def _gang() -> list[str]:
    """The `gang` a user runs: the console script beside this interpreter (python -m adds runpy's import)."""
    script = Path(sys.executable).with_name("gang")
    return [str(script)] if script.exists() else [sys.executable, "-m", "gangsched.cli"]


def command_latencies(master: str, runs: int) -> list[dict[str, Any]]:
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    environment["GANG_MASTER"] = master
    runs_of = {FLOOR: [sys.executable, "-c", "pass"]}
    runs_of.update({f"gang {' '.join(arguments)}": [*_gang(), *arguments] for arguments in COMMANDS})
    return [whole_process_ms(name, command, environment, runs) for name, command in runs_of.items()]


def whole_process_ms(name: str, command: list[str], environment: dict[str, str], runs: int) -> dict[str, Any]:
    """``command`` run ``runs`` times as a process of its own, after one untimed run (which writes its
    bytecode): its median, fastest and slowest, in milliseconds. A run that fails raises ``RuntimeError``."""
    took = []
    for run in range(runs + 1):
        start = time.perf_counter()
        result = subprocess.run(command, env=environment, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                text=True)
        if run:
            took.append((time.perf_counter() - start) * 1000)
        if result.returncode != 0:
            raise RuntimeError(f"{name} failed: {result.stderr.strip()}")
    return {"command": name, "runs": runs, "median_ms": round(statistics.median(took), 1),
            "min_ms": round(min(took), 1), "max_ms": round(max(took), 1)}


def parallel_submissions(master: str, clients: int, each: int) -> list[dict[str, Any]]:
    """``clients`` shell loops at once, each running ``gang submit`` ``each`` times in a row: the
    submissions the master accepted a second, as a sweep's scripts see it; beside it, the same loops of
    the interpreter alone (``python -c pass``), a rate no command that starts this interpreter can pass."""
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    environment["GANG_MASTER"] = master
    return [parallel_runs(FLOOR, [sys.executable, "-c", "pass"], environment, clients, each),
            parallel_runs(f"gang {' '.join(SUBMIT)}", [*_gang(), *SUBMIT], environment, clients, each)]


def parallel_runs(name: str, command: list[str], environment: dict[str, str], clients: int,
                  each: int) -> dict[str, Any]:
    """``clients`` shell loops of ``command`` at once, ``each`` runs in a row each: runs a second; a run
    that fails raises ``RuntimeError`` with what it wrote to its standard error."""
    loop = "(" + " && ".join([shlex.join(command)] * each) + ") > /dev/null"
    start = time.perf_counter()
    running = [subprocess.Popen(["/bin/sh", "-c", loop], env=environment, stderr=subprocess.PIPE, text=True)
               for _ in range(clients)]
    failures = []
    for process in running:
        _, errors = process.communicate()
        if process.returncode != 0:
            failures.append(errors.strip())
    if failures:
        raise RuntimeError(f"a client's {name} failed: {failures[0]}")
    seconds = time.perf_counter() - start
    return {"command": f"{clients} clients x {each} {name}", "runs": clients * each,
            "runs_per_s": round(clients * each / seconds, 1)}
