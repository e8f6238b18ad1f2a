"""`gang bench cli`: how long `gang` commands take as whole processes, as a user or a script
running them in a loop sees it (interpreter start, imports, the request, the output).

As installed, Python keeps the compiled bytecode of every module: the commands run with
bytecode writing on (whatever PYTHONDONTWRITEBYTECODE says here) and once untimed first."""

import os
import statistics
import subprocess
import sys
import time
from typing import Any

# each as its own `gang` process; a job command asks the cluster the benchmark started
COMMANDS = (("--help",), ("queue",), ("queue", "--all"), ("nodes",), ("matrix",), ("sim", "--help"))


def command_latencies(master: str, runs: int) -> list[dict[str, Any]]:
    environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
    environment["GANG_MASTER"] = master
    rows = []
    for arguments in COMMANDS:
        took = []
        for run in range(runs + 1):
            start = time.perf_counter()
            result = subprocess.run([sys.executable, "-m", "gangsched.cli", *arguments], env=environment,
                                    stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
            if run:  # the first writes the bytecode
                took.append((time.perf_counter() - start) * 1000)
            if result.returncode != 0:
                raise RuntimeError(f"gang {' '.join(arguments)} failed: {result.stderr.strip()}")
        rows.append({"command": f"gang {' '.join(arguments)}", "runs": runs,
                     "median_ms": round(statistics.median(took), 1), "min_ms": round(min(took), 1),
                     "max_ms": round(max(took), 1)})
    return rows
