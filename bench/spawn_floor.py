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
import tempfile
import time
from pathlib import Path

from gangsched.noded.cgroups import cgroup_of, node_root

TRUE = "/bin/true"


def spawn_rate(seconds: float, in_cgroup: bool) -> float | None:
    """Tasks of ``/bin/true`` started and waited for a second, on every core at once; None where no
    cgroup v2 group can be made here (``in_cgroup``)."""
    # a folder of this run's below this process's own group, as a node daemon makes its own
    parent = node_root(f"floor-{os.getpid()}", cgroup_of("self")) if in_cgroup else None
    if in_cgroup and parent is None:
        return None
    # one forked loop per core, each writing its count to a pipe: a pool of multiprocessing's, forked
    # from a process with threads of its own (the bench's cluster client), could hang on its locks
    loops = []
    for worker in range(os.cpu_count() or 1):
        reader, writer = os.pipe()
        pid = os.fork()
        if pid == 0:
            try:
                os.close(reader)
                os.write(writer, str(_spawn_loop(seconds, parent, worker)).encode())
            finally:
                os._exit(0)
        os.close(writer)
        loops.append((pid, reader))
    counts = []
    for pid, reader in loops:
        with os.fdopen(reader, "rb") as counted:
            counts.append(int(counted.read() or b"0"))
        os.waitpid(pid, 0)
    if parent is not None:
        parent.rmdir()
    return sum(counts) / seconds


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


def _spawn_loop(seconds: float, parent: Path | None, worker: int) -> int:
    count, deadline = 0, time.monotonic() + seconds
    while time.monotonic() < deadline:
        group = None
        if parent is not None:
            group = parent / f"w{worker}-t{count}"
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

