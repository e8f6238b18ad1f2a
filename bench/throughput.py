"""`gang bench throughput`: how many small jobs a second the cluster takes from submission to their
end written in the store, and where the time goes (docs/limits.md, "Throughput").

N one-task jobs (``/bin/true`` by default) are submitted on a fresh local cluster,
as arrays or by C clients submitting single jobs in parallel. The rate is from
the first submission until the last job's COMPLETED is in the master's store
(read from the store file itself, read-only, every 50 ms). Beside it:

* the phases: the submissions as the clients saw them; queued -> launched and
  launched -> ended, each job's own times (the medians); ended -> written, the
  last end against the moment the bench saw it written;
* the master's CPU and resident memory, and the switch latency (median and
  p99) during the flood against the same cluster idle just before (100
  switches after the floor's loops);
* where each job's CPU went on a local cluster: the master's, the node
  daemons' (their own code, and the kernel's work for them) and the tasks'
  (the first process at its gate and ``/bin/true``, as their daemons reaped
  them), in ms a job;
* the jobs a second against the queue's depth, sampled as it drains (CSV, and a
  PNG beside it);
* the machine's floor measured in the same run (bench/spawn_floor.py), and
  the rate as a ratio to it; and, after the flood, what making one empty file
  in the cluster's folder costs then, as each job's output was made (the
  file system's state: docs/limits.md, "Each job's output, on a file system
  without a journal").

With ``emulated_nodes`` the cluster is a real master and that many emulated
node daemons (bench/scale_agents.py), whose tasks end as soon as they run: the
rate of the master and the node daemons' protocol, with no process started
(and so no floor beside it).
"""

import contextlib
import getpass
import sqlite3
import statistics
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import psutil

from gangsched.bench.scale import emulated_cluster
from gangsched.bench.spawn_floor import commit_rate, file_cost_us, spawn_rate
from gangsched.client.master_client import MasterClient
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import temporary_local_cluster
from gangsched.protocol.records import JobSpec
from gangsched.sim.report import percentile

_POLL_S = 0.05
_IDLE_SWITCHES = 100  # 10 s at 100 ms quanta: a p99 that is not merely the largest of them


@dataclass
class ThroughputRun:
    jobs: int
    mode: str  # "10 arrays" or "8 clients"
    seconds: float
    jobs_per_s: float
    submit_s: float
    queued_to_launched_ms: float
    launched_to_ended_ms: float
    ended_to_written_ms: float
    master_cpu_s: float
    master_rss_mb: float
    switch_idle_p50_ms: float
    switch_idle_p99_ms: float
    switch_flood_p50_ms: float
    switch_flood_p99_ms: float
    floor_spawn_per_s: float | None  # None: not measured (emulated nodes start no process)
    floor_spawn_cgroup_per_s: float | None
    floor_commits_per_s: float | None
    output: str | None = None  # each job's output pattern; None: the node's spool, as `gang submit` gives it
    output_file_us: float | None = None  # None: no output made here (emulated nodes, containers)
    nodes: "NodeCpu | None" = None  # None: no node daemon of this machine's to read (emulated, in containers)
    samples: list[dict[str, float]] = field(default_factory=list)  # queue depth and rate as it drained

    def row(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs, "submitted as": self.mode, "seconds": round(self.seconds, 2),
            "jobs_per_s": round(self.jobs_per_s, 1),
            "of spawn floor": _share(self.jobs_per_s, self.floor_spawn_per_s),
            "of cgroup floor": _share(self.jobs_per_s, self.floor_spawn_cgroup_per_s),
            "of commit floor": _share(self.jobs_per_s, self.floor_commits_per_s),
            "submit_s": round(self.submit_s, 2),
            "submissions_per_s": round(self.jobs / self.submit_s, 1) if self.mode.endswith("clients") else None,
            "queued_to_launched_ms": round(self.queued_to_launched_ms, 1),
            "launched_to_ended_ms": round(self.launched_to_ended_ms, 1),
            "ended_to_written_ms": round(self.ended_to_written_ms, 1),
            "master_cpu_s": round(self.master_cpu_s, 2), "master_rss_mb": round(self.master_rss_mb, 1),
            "master_ms_per_job": self._per_job(self.master_cpu_s),
            "nodes_user_ms_per_job": self._per_job(None if self.nodes is None else self.nodes.user_s),
            "nodes_system_ms_per_job": self._per_job(None if self.nodes is None else self.nodes.system_s),
            "tasks_ms_per_job": self._per_job(None if self.nodes is None else self.nodes.tasks_s),
            "switch_idle_p50_ms": round(self.switch_idle_p50_ms, 3),
            "switch_idle_p99_ms": round(self.switch_idle_p99_ms, 3),
            "switch_flood_p50_ms": round(self.switch_flood_p50_ms, 3),
            "switch_flood_p99_ms": round(self.switch_flood_p99_ms, 3),
            "floor_spawn_per_s": _round(self.floor_spawn_per_s),
            "floor_spawn_cgroup_per_s": _round(self.floor_spawn_cgroup_per_s),
            "floor_commits_per_s": _round(self.floor_commits_per_s),
            "output": self.output or "the node's spool",
            "output_file_us_after": _round(self.output_file_us),
        }

    def _per_job(self, seconds: float | None) -> float | None:
        return None if seconds is None else round(seconds * 1000 / self.jobs, 2)


@dataclass(frozen=True)
class NodeCpu:
    """CPU seconds of a cluster's node daemons: in their own code, in the kernel for them, and of the
    tasks they started and reaped."""

    user_s: float
    system_s: float
    tasks_s: float

    @classmethod
    def read(cls, pids: list[int]) -> "NodeCpu":
        times = [psutil.Process(pid).cpu_times() for pid in pids]
        return cls(sum(time.user for time in times), sum(time.system for time in times),
                   sum(time.children_user + time.children_system for time in times))

    def __sub__(self, before: "NodeCpu") -> "NodeCpu":
        return NodeCpu(self.user_s - before.user_s, self.system_s - before.system_s, self.tasks_s - before.tasks_s)


def _share(rate: float, floor: float | None) -> float | None:
    return None if not floor else round(rate / floor, 3)


def _round(rate: float | None) -> float | None:
    return None if rate is None else round(rate, 1)


def measure_throughput(config: ClusterConfig, jobs: int, arrays: int | None, clients: int | None,
                       command: list[str], floor_s: float = 3.0, emulated_nodes: int | None = None,
                       docker: bool = False, store_url: str = "", output: str | None = None) -> ThroughputRun:
    """``arrays`` of jobs/arrays each, or ``clients`` submitting jobs/clients single jobs each, on a fresh
    cluster: the local one of ``config``, its compose cluster (``docker``), or ``emulated_nodes``;
    ``store_url``: the PostgreSQL database its master keeps its jobs in (the config's), else its file;
    ``output``: each job's output pattern (`gang submit -o`), else the node's spool."""
    with _flooded_cluster(config, emulated_nodes, docker) as (client, store, node_daemons):
        return flood(client, store, jobs, arrays, clients, command, None if emulated_nodes else floor_s, store_url,
                     node_daemons, output)


def flood(client: MasterClient, store: Path, jobs: int, arrays: int | None, clients: int | None,
          command: list[str], floor_s: float | None, store_url: str = "",
          node_daemons: list[int] | None = None, output: str | None = None) -> ThroughputRun:
    """The flood on the cluster of ``client``, whose master's store is the file ``store`` (or the database
    ``store_url``); the floor beside it unless ``floor_s`` is None; the CPU of the node daemons of
    ``node_daemons`` (pids on this machine) and of their tasks; with them, what a file costs to make after
    the flood, beside ``store`` (on the file system of the nodes' spools)."""
    spec = JobSpec(name="true", user=getpass.getuser(), tasks=1, argv=command, cwd="/", env={}, output=output)
    floor: tuple[float | None, float | None, float | None] = (None, None, None)
    if floor_s is not None:
        # the commits on the file system of the master's store, as it commits
        floor = (spawn_rate(floor_s, in_cgroup=False), spawn_rate(floor_s, in_cgroup=True),
                 commit_rate(floor_s, store.parent))
    # the idle cluster's switches, to compare with: all of them after the floor's loops, which keep every
    # core busy (the last switches before the flood were taken before, some of them during those loops)
    after_floor = client.stats().quanta
    while client.stats().quanta < after_floor + _IDLE_SWITCHES + 1:
        time.sleep(_POLL_S)
    idle = client.switch_stats(_IDLE_SWITCHES).latencies_ns
    before = client.stats()
    nodes_before = None if node_daemons is None else NodeCpu.read(node_daemons)
    started = time.monotonic()
    watcher = _StoreWatch(store_url or store, jobs, started)
    watcher.start()  # samples the queue while the jobs are submitted, too
    _submit(client, spec, jobs, arrays, clients)
    submit_s = time.monotonic() - started
    written_at = watcher.result()
    seconds = written_at - started
    after = client.stats()
    nodes = None if node_daemons is None or nodes_before is None else NodeCpu.read(node_daemons) - nodes_before
    flooded = client.switch_stats(max(1, after.quanta - before.quanta)).latencies_ns
    phases = watcher.phases()
    # the store's folder is in the local cluster's home, as the nodes' spools are: the same file system
    output_file_us = None if node_daemons is None else file_cost_us(store.parent)
    return ThroughputRun(
        jobs=jobs, mode=f"{arrays} arrays" if arrays else f"{clients} clients", seconds=seconds,
        jobs_per_s=jobs / seconds, submit_s=submit_s,
        queued_to_launched_ms=phases[0], launched_to_ended_ms=phases[1], ended_to_written_ms=phases[2],
        master_cpu_s=after.cpu_s - before.cpu_s, master_rss_mb=after.resident_bytes / 2**20,
        switch_idle_p50_ms=_ms(idle, 0.5), switch_idle_p99_ms=_ms(idle, 0.99),
        switch_flood_p50_ms=_ms(flooded, 0.5), switch_flood_p99_ms=_ms(flooded, 0.99),
        floor_spawn_per_s=floor[0], floor_spawn_cgroup_per_s=floor[1], floor_commits_per_s=floor[2],
        output=output, output_file_us=output_file_us, nodes=nodes, samples=watcher.samples,
    )


@contextlib.contextmanager
def _flooded_cluster(config: ClusterConfig, emulated_nodes: int | None,
                     docker: bool) -> Iterator[tuple[MasterClient, Path, list[int] | None]]:
    """A client of a fresh cluster, the file of its master's store, and the pids of its node daemons
    where they run here as themselves."""
    if emulated_nodes is not None:
        with emulated_cluster(emulated_nodes, config.quantum_ms, instant_tasks=True) as emulated:
            yield emulated.client, emulated.work / "master" / "jobs.db", None
        return
    if docker:
        from gangsched.deploy.compose import DockerCluster, temporary_docker_cluster

        with temporary_docker_cluster(config) as client:
            yield client, DockerCluster().master_store(), None
        return
    with temporary_local_cluster(config) as cluster:
        state = cluster.state()
        assert state is not None
        node_daemons = [state.pids[name] for name, command in state.commands.items() if command[0] == "noded"]
        with cluster.client(state, timeout_s=30.0) as client:
            yield client, cluster.home / "master" / "jobs.db", node_daemons


def _submit(cluster: MasterClient, spec: JobSpec, jobs: int, arrays: int | None, clients: int | None) -> None:
    if arrays:
        with cluster.another(timeout_s=60.0) as client:
            per = -(-jobs // arrays)
            for first in range(0, jobs, per):
                client.submit_jobs(spec, [(0, min(jobs, first + per) - first - 1, 1)], retry_s=60.0)
        return
    count = clients or 1
    threads = [threading.Thread(target=_submit_singles, args=(cluster, spec, jobs // count + (i < jobs % count)))
               for i in range(count)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def _submit_singles(cluster: MasterClient, spec: JobSpec, count: int) -> None:
    with cluster.another(timeout_s=60.0) as client:
        for _ in range(count):
            client.submit(spec, retry_s=60.0)


class _StoreWatch(threading.Thread):
    """The master's store as the jobs drain: how many are written COMPLETED, how many wait."""

    def __init__(self, where: Path | str, jobs: int, started: float, timeout_s: float = 3600.0) -> None:
        """``where``: the store's SQLite file, or its PostgreSQL database's URL."""
        super().__init__(daemon=True)
        self._where, self._jobs, self._began, self._timeout_s = where, jobs, started, timeout_s
        self._written_at = 0.0  # Unix time the last job was seen written
        self._done_at: float | None = None  # monotonic
        self._error = ""
        self.samples: list[dict[str, float]] = []

    def run(self) -> None:
        deadline = self._began + self._timeout_s
        last_done, last_at = 0, self._began
        while time.monotonic() < deadline:
            done, failed, pending = self._counts()
            now = time.monotonic()
            if failed:
                self._error = f"{failed} jobs ended other than COMPLETED: see the cluster's logs"
                return
            rate = (done - last_done) / (now - last_at) if now > last_at else 0.0
            self.samples.append({"s": round(now - self._began, 3), "pending": pending, "completed": done,
                                 "jobs_per_s": round(rate, 1)})
            last_done, last_at = done, now
            if done >= self._jobs:
                self._written_at, self._done_at = time.time(), now
                return
            time.sleep(_POLL_S)
        self._error = f"the jobs did not all complete within {self._timeout_s:g} s"

    def result(self) -> float:
        """When every job was seen written COMPLETED (monotonic); RuntimeError if one ended otherwise."""
        self.join()
        if self._done_at is None:
            raise RuntimeError(self._error)
        return self._done_at

    def phases(self) -> tuple[float, float, float]:
        """Medians, in ms: queued -> launched, launched -> ended; and the last end -> seen written."""
        with contextlib.closing(self._connect()) as db:
            rows = db.execute("SELECT submit_time, start_time, end_time FROM jobs").fetchall()
        queued = statistics.median((start - submit) * 1000 for submit, start, _ in rows)
        running = statistics.median((end - start) * 1000 for _, start, end in rows)
        written = (self._written_at - max(end for _, _, end in rows)) * 1000
        return queued, running, written

    def _counts(self) -> tuple[int, int, int]:
        passing: tuple[type[Exception], ...] = (sqlite3.OperationalError, *_postgres_errors(self._where))
        try:
            with contextlib.closing(self._connect()) as db:
                states = dict(db.execute("SELECT state, COUNT(*) FROM jobs GROUP BY state").fetchall())
        except passing:  # not made yet, or locked a moment
            return 0, 0, self._jobs
        done = states.pop("completed", 0)
        pending = states.pop("pending", 0)
        states.pop("running", None)
        return done, sum(states.values()), pending

    def _connect(self) -> Any:
        if isinstance(self._where, str):
            import psycopg

            return psycopg.connect(self._where, autocommit=True)
        return sqlite3.connect(f"file:{self._where}?mode=ro", uri=True, timeout=5.0)


def _postgres_errors(where: Path | str) -> tuple[type[Exception], ...]:
    if not isinstance(where, str):
        return ()
    import psycopg

    return (psycopg.OperationalError,)


def _ms(latencies_ns: list[int], fraction: float) -> float:
    ordered = sorted(float(ns) for ns in latencies_ns)
    return percentile(ordered, fraction) / 1e6 if ordered else 0.0


def plot(run: ThroughputRun, path: Path) -> None:
    """Jobs a second against the queue's depth as it drained."""
    from matplotlib.figure import Figure

    figure = Figure(figsize=(7, 4), layout="constrained")
    axes = figure.add_subplot()
    depths, rates = [], []
    queued = [sample for sample in run.samples if sample["pending"] or sample["completed"]]  # once submitted
    first = queued[0] if queued else None
    for sample in queued[1:]:  # over windows of a second or more: a 50 ms sample sees 0 or a few
        assert first is not None
        if sample["s"] - first["s"] >= 1.0:
            depths.append((first["pending"] + sample["pending"]) / 2)
            rates.append((sample["completed"] - first["completed"]) / (sample["s"] - first["s"]))
            first = sample
    axes.plot(depths, rates, "o", alpha=0.7)
    axes.set_xlabel("jobs queued (pending)")
    axes.set_ylabel("jobs completed a second")
    axes.set_title(f"{run.jobs:,} jobs as {run.mode}: {run.jobs_per_s:.0f} jobs/s end to end")
    figure.savefig(path, dpi=120)
