"""Attacks that are load, each measured beside the same window of a quiet cluster: what the switch and
another client's queries cost while one account sends the master messages of several megabytes, floods
a PMI key-value space past its bound, or floods a job's barrier with frames that carry no token.

For each window: the switch latency (the master's send to the last node's apply) at the median and
the 99th percentile, from the nodes' own reports, and the time another client's `gang queue` query
takes, at the median and the 99th percentile. docs/limits.md holds the figures of a run.
"""

import getpass
import logging
import statistics
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

import zmq

from gangsched.client.master_client import MasterClient
from gangsched.daemon.realtime import raise_priority
from gangsched.deploy.local import ClusterState, LocalCluster, task_processes
from gangsched.jobs.adversaries import PMI_FLOOD
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.protocol import task_environment
from gangsched.protocol.frames import pack
from gangsched.protocol.records import JobSpec, JobState, MpiKind

ATTACKS = ("idle", "large messages", "PMI floods", "barrier floods")
_QUERY_PRIORITY = 5  # below every daemon's (the node daemons' 30, the master's 40)
log = logging.getLogger("gangsched.bench")

_LARGE_VARIABLES = 300_000  # a submission of about 3 MB whose decoding took the master a second


@dataclass(frozen=True)
class LoadResult:
    attack: str
    seconds: float
    sent: int  # what the attack sent: messages, PMI jobs, or barrier frames
    switch_p50_ms: float
    switch_p99_ms: float
    query_p50_ms: float
    query_p99_ms: float
    attack_jobs: dict[str, int]  # how the attack's own jobs ended, where it ran any
    victim: str  # how the barrier job beside the barrier flood ended ("" elsewhere)


def run_attack(cluster: LocalCluster, attack: str, seconds: float, quantum_ms: int) -> LoadResult:
    """One window of ``attack`` (one of ATTACKS), with the measures taken meanwhile."""
    state = _state(cluster)
    queries: list[float] = []
    stopping = threading.Event()
    with cluster.client(state, timeout_s=30.0) as client:
        querying = threading.Thread(target=_query, args=(cluster, state, queries, stopping), daemon=True)
        querying.start()
        started = time.monotonic()
        sent, jobs, victim = _ATTACKS[attack](cluster, state, client, started + seconds)
        stopping.set()
        querying.join()
        elapsed = time.monotonic() - started
        quanta = max(1, int(elapsed * 1000 / quantum_ms))
        latencies = sorted(ns / 1e6 for ns in client.switch_stats(quanta).latencies_ns)
    return LoadResult(attack, elapsed, sent, *_median_p99(latencies), *_median_p99(sorted(queries)), jobs, victim)


def _idle(cluster: LocalCluster, state: ClusterState, client: MasterClient,
          until: float) -> tuple[int, dict[str, int], str]:
    time.sleep(max(0.0, until - time.monotonic()))
    return 0, {}, ""


def _large_messages(cluster: LocalCluster, state: ClusterState, client: MasterClient,
                    until: float) -> tuple[int, dict[str, int], str]:
    """One client sends submissions of many small variables as fast as the master takes them."""
    spec = {"name": "large", "user": getpass.getuser(), "tasks": 1, "argv": ["true"],
            "env": {f"V{index}": "" for index in range(_LARGE_VARIABLES)}}
    frame = pack({"type": "submit", "spec": spec})
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(state.master)
    sent = 0
    try:
        while time.monotonic() < until:
            if socket.poll(10, zmq.POLLOUT):
                socket.send(frame, copy=False)
                sent += 1
            while socket.poll(0):
                socket.recv_multipart()
    finally:
        socket.close()
    return sent, {}, ""


def _pmi_floods(cluster: LocalCluster, state: ClusterState, client: MasterClient,
                until: float) -> tuple[int, dict[str, int], str]:
    """One-task MPI jobs that put into their key-value space until their node ends them, one after another."""
    spec = JobSpec(name="pmi-flood", user=getpass.getuser(), tasks=1, mpi=MpiKind.PMI1,
                   argv=[sys.executable, "-c", PMI_FLOOD])
    job_ids: list[int] = []
    while time.monotonic() < until:
        job_ids.append(client.submit(spec))
        _wait_for(lambda: client.job(job_ids[-1]).state.is_final or time.monotonic() > until)
    return len(job_ids), _ended(client, job_ids), ""


def _barrier_floods(cluster: LocalCluster, state: ClusterState, client: MasterClient,
                    until: float) -> tuple[int, dict[str, int], str]:
    """A job of barriers on two nodes, and frames without its token at its rank 0's socket all the while."""
    program = SyntheticJob("compute", iterations=1_000_000, compute_ms=1)
    victim = client.submit(JobSpec(name="barriers", user=getpass.getuser(), tasks=2, argv=program.argv()))
    _wait_for(lambda: client.job(victim).barriers > 0)
    address = _barrier_address(cluster, victim)
    socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.DEALER)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.SNDHWM, 100_000)
    socket.connect(address)
    sent = 0
    try:
        while time.monotonic() < until:
            if socket.poll(10, zmq.POLLOUT):
                socket.send(b"")
                sent += 1
    finally:
        socket.close()
    shown = client.job(victim)
    outcome = f"{shown.state.value}, {shown.barriers} barriers"
    client.cancel(victim, getpass.getuser())
    return sent, {}, outcome


_ATTACKS: dict[str, Callable[[LocalCluster, ClusterState, MasterClient, float], tuple[int, dict[str, int], str]]] = {
    "idle": _idle, "large messages": _large_messages, "PMI floods": _pmi_floods, "barrier floods": _barrier_floods}


def _barrier_address(cluster: LocalCluster, job_id: int) -> str:
    """Where the job's rank 0 listens, as its environment says (this account's own job)."""
    for process in task_processes(cluster.home, job_id):
        environment = process.environ()
        if environment.get(task_environment.RANK) == "0" and task_environment.BARRIER_BIND in environment:
            return str(environment[task_environment.BARRIER_ADDR])
    raise RuntimeError(f"job {job_id}'s rank 0 was not found")


def _query(cluster: LocalCluster, state: ClusterState, took: list[float], stopping: threading.Event) -> None:
    """Another client's `gang queue`, one after another, each timed: at real-time priority (below the
    daemons') where it may, so that it times the master, not its own share of two busy cores."""
    raise_priority(_QUERY_PRIORITY, log)
    with cluster.client(state, timeout_s=30.0) as other:
        while not stopping.is_set():
            asked = time.perf_counter()
            other.jobs()
            took.append((time.perf_counter() - asked) * 1000)
            stopping.wait(0.02)


def _ended(client: MasterClient, job_ids: list[int]) -> dict[str, int]:
    _wait_for(lambda: all(info.state.is_final for info in client.jobs(job_ids)))
    counts: dict[str, int] = {}
    for info in client.jobs(job_ids):
        counts[info.state.value] = counts.get(info.state.value, 0) + 1
    return counts


def _wait_for(condition: Callable[[], bool], timeout_s: float = 120.0) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"a condition of the attack did not come within {timeout_s:g} s")
        time.sleep(0.05)


def _median_p99(values: list[float]) -> tuple[float, float]:
    if not values:
        return 0.0, 0.0
    return round(statistics.median(values), 3), round(values[min(len(values) - 1, int(len(values) * 0.99))], 3)


def _state(cluster: LocalCluster) -> ClusterState:
    state = cluster.state()
    if state is None:
        raise RuntimeError(f"no cluster in {cluster.home}")
    return state


def failed_as_asked(result: LoadResult) -> bool:
    """Whether the attack's own jobs ended as the bounds end them (failed), where it ran any."""
    return set(result.attack_jobs) <= {JobState.FAILED.value}
