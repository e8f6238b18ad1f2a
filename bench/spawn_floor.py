"""The floor under a job's throughput on this machine (docs/limits.md, "Throughput"): how many
processes it can start and wait for, and how many fsync'd commits its disk takes, a second.

* **spawn-and-wait**: fork, exec ``/bin/true`` and wait for it, in a loop on every
  core at once, bare, and with a fresh cgroup v2 group made for each task, joined
  by the child before it execs and removed after (what a node daemon does for
  every task it runs);
* **commits**: one row inserted and committed at a time into SQLite in WAL mode
  with ``synchronous=FULL`` (the master's store), in a folder of the same file
  system as the temporary folder.

A design that writes each state change of each job in a transaction of its own
is capped by the second; one that starts a process per task, by the first.
"""

import os
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from gangsched.noded.cgroups import cgroup_of, node_root

TRUE = "/bin/true"


def spawn_rate(seconds: float, in_cgroup: bool) -> float | None:
    """Tasks of ``/bin/true`` started and waited for a second, on every core at once; None where no
    cgroup v2 group can be made here (``in_cgroup``)."""
    # a folder of this run's below this process's own group, as a node daemon makes its own
    parent = node_root(f"floor-{os.getpid()}", cgroup_of("self")) if in_cgroup else None
    if in_cgroup and parent is None:
        return None
    # one loop per core, each in an interpreter of its own that loads this module alone: a fork copies
    # its parent's page tables, and every page either side writes afterwards, so loops forked from the
    # benchmark's own process (its cluster client, pydantic: 50 MB and more) measured that process, a
    # third or less of what the machine does (docs/limits.md, "The floor, measured from a small process")
    loop = f"from {__name__} import spawn_loop; import sys; print(spawn_loop(*sys.argv[1:]))"
    workers = [subprocess.Popen([sys.executable, "-c", loop, str(seconds), str(parent or ""), str(worker)],
                                stdout=subprocess.PIPE, text=True) for worker in range(os.cpu_count() or 1)]
    counts = [int(worker.communicate()[0] or 0) for worker in workers]
    if parent is not None:
        parent.rmdir()
    return sum(counts) / seconds


def floor_rows(seconds: float) -> list[dict[str, Any]]:
    """`gang bench floor`'s rows of these: tasks started and waited for a second on every core, bare and in
    a fresh cgroup each (where one can be made here), and fsync'd commits a second, each for ``seconds``."""
    cores = os.cpu_count() or 1
    rows: list[dict[str, Any]] = [
        {"measure": f"spawn and wait of {TRUE}", "n": cores, "per_s": round(spawn_rate(seconds, False) or 0, 1)}]
    in_cgroup = spawn_rate(seconds, True)
    if in_cgroup is not None:
        rows.append({"measure": f"spawn and wait of {TRUE}, a fresh cgroup each", "n": cores,
                     "per_s": round(in_cgroup, 1)})
    rows.append({"measure": "fsync'd SQLite commits", "n": 1, "per_s": round(commit_rate(seconds), 1)})
    rows.append({"measure": "empty files made in the temporary folder's file system, of a core's time", "n": 1,
                 "per_s": round(1e6 / file_cost_us(Path(tempfile.gettempdir())), 1)})
    return rows


def commit_rate(seconds: float, folder: Path | None = None) -> float:
    """Commits a second of one small row each, fsync'd as the master's store commits."""
    with tempfile.TemporaryDirectory(prefix="gang-commits-", dir=folder) as temporary:
        db = sqlite3.connect(Path(temporary) / "commits.db", isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        db.execute("CREATE TABLE rows (id INTEGER PRIMARY KEY, body TEXT)")
        count, deadline = 0, time.monotonic() + seconds
        while time.monotonic() < deadline:
            with db:
                db.execute("BEGIN")
                db.execute("INSERT INTO rows (body) VALUES (?)", ("x" * 200,))
            count += 1
        db.close()
    return count / seconds


def file_cost_us(folder: Path, count: int = 1000) -> float:
    """The CPU (this process's, the kernel's work for it included) to make one empty file in a fresh folder
    below ``folder``, as a node makes each task's output: the mean of ``count``, in microseconds; they are
    removed after. Few, as removing them costs what comes after on some file systems: ext4 without a
    journal passes over every inode freed in the last minutes at each file it makes (docs/limits.md,
    "Each job's output, on a file system without a journal")."""
    with tempfile.TemporaryDirectory(prefix="gang-files-", dir=folder) as temporary:
        started = time.process_time()
        for number in range(count):
            os.close(os.open(f"{temporary}/{number}.out", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
        return (time.process_time() - started) / count * 1e6


def spawn_loop(seconds: str, parent: str, worker: str) -> int:
    """One core's loop, as ``spawn_rate`` runs it in an interpreter of its own (its arguments as given on
    the command line; ``parent``: "" for bare tasks): the tasks it started and waited for."""
    group_parent = Path(parent) if parent else None
    count, deadline = 0, time.monotonic() + float(seconds)
    while time.monotonic() < deadline:
        group = None
        if group_parent is not None:
            group = group_parent / f"w{worker}-t{count}"
            group.mkdir()
        pid = os.fork()
        if pid == 0:  # the child: into its group, then the program
            try:
                if group is not None:
                    (group / "cgroup.procs").write_text("0")
                os.execv(TRUE, [TRUE])
            finally:
                os._exit(127)
        os.waitpid(pid, 0)
        if group is not None:
            group.rmdir()
        count += 1
    return count
