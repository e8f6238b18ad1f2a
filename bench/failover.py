"""Takeovers of the lead between masters that share a PostgreSQL store (docs/architecture.md,
"Leadership"): the leader killed (-9), stopped (SIGSTOP), cut off (the first master runs in a network
namespace of its own, bench/isolation.py, whose link is taken down) or asked to hand over (``gang
admin takeover``), again and again, while clients submit one-task jobs and one gang runs across every
node.

A takeover is timed from the fault to the first switch of the new leader's epoch, as a node would
hear it: a subscriber of every master's switch socket notes each switch's arrival and epoch. After
each, the fault is undone (the killed master started again, the stopped one continued, the cut one's
link up again: each finds itself fenced and stands by) before the next. What must hold: every
submission one job, every job completed, none made twice; the gang's tasks those it started with; no
node obeyed an older epoch (they count what they refuse).
"""

import getpass
import signal
import statistics
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psutil
import zmq

from gangsched.bench.isolation import Namespace
from gangsched.bench.restarts import wait_for_ends
from gangsched.client.master_client import MasterClient
from gangsched.daemon.curve import NODE_USER, KeyFolder
from gangsched.deploy.local import LocalCluster, task_processes
from gangsched.protocol.codec import decode
from gangsched.protocol.leadership_messages import MasterInfo, MasterRole
from gangsched.protocol.messages import SlotSwitch
from gangsched.protocol.records import JobSpec, JobState

FAULTS = ("kill", "stop", "cut", "takeover")
_WAIT_S = 60.0
_RETRY_S = 60.0


@dataclass(frozen=True)
class Takeover:
    fault: str
    seconds: float  # from the fault to the first switch of the new leader
    gap_s: float  # from the old leader's last switch to the new leader's first: a quantum, and what was lost
    nodes_back_s: float  # from the fault until every node is up under the new leader


@dataclass(frozen=True)
class FailoverResult:
    takeovers: list[Takeover]
    submissions: int
    accepted: int
    completed: int
    lost: int  # accepted, and the masters do not know the job
    duplicates: int  # jobs no submission got the id of
    longest_submission_s: float  # a client's longest wait for one submission's answer
    gang_ran_on: bool  # the gang started before the first fault ran to the end on the tasks it started with
    stale_refused: int  # messages of an older leader's epoch the nodes refused


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def summary(takeovers: list[Takeover]) -> list[dict[str, object]]:
    """Per fault: the takeover time's median, p99 and longest, and the nodes' return."""
    rows: list[dict[str, object]] = []
    for fault in FAULTS:
        times = [each.seconds for each in takeovers if each.fault == fault]
        if times:
            back = [each.nodes_back_s for each in takeovers if each.fault == fault]
            gaps = [each.gap_s for each in takeovers if each.fault == fault]
            rows.append({"fault": fault, "runs": len(times), "median_s": round(statistics.median(times), 3),
                         "p99_s": round(percentile(times, 0.99), 3), "max_s": round(max(times), 3),
                         "gap_s": round(statistics.median(gaps), 3),
                         "nodes_back_s": round(statistics.median(back), 3)})
    return rows


class SwitchWatch:
    """Every switch every master sends, as a node hears it: when it came, and its leader epoch."""

    def __init__(self, endpoints: list[str], keys: Path | None) -> None:
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.SUB)
        self._socket.setsockopt(zmq.SUBSCRIBE, b"")
        self._socket.setsockopt(zmq.LINGER, 0)
        if keys is not None:  # only the nodes' key hears the switches: the cluster's owner holds it
            KeyFolder(keys).connect_as(self._socket, NODE_USER)
        for endpoint in endpoints:
            self._socket.connect(endpoint)
        self._heard: list[tuple[float, int]] = []
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._listen, daemon=True)
        self._thread.start()

    def _listen(self) -> None:
        while not self._stop.is_set():
            if self._socket.poll(50):
                switch = decode(self._socket.recv())
                if isinstance(switch, SlotSwitch):
                    with self._lock:
                        self._heard.append((time.monotonic(), switch.leader_epoch))

    def first_after(self, epoch: int, since: float) -> float | None:
        """When the first switch of an epoch above ``epoch`` came after ``since``; None: none yet."""
        with self._lock:
            return next((at for at, heard in self._heard if at >= since and heard > epoch), None)

    def last_of(self, epoch: int, before: float) -> float:
        """When the last switch of ``epoch`` came before ``before``."""
        with self._lock:
            return max((at for at, heard in self._heard if heard == epoch and at < before), default=before)

    def close(self) -> None:
        self._stop.set()
        self._thread.join()
        self._socket.close()


def _wait(what: str, check: Callable[[], object]) -> object:
    deadline = time.monotonic() + _WAIT_S
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.01)
    raise TimeoutError(f"no {what} within {_WAIT_S:g} s")


def _fault_once(cluster: LocalCluster, client: MasterClient, watch: SwitchWatch, names: dict[str, str], fault: str,
                nodes: int, namespace: Namespace | None) -> Takeover:
    """One fault of the leader, timed, then undone: the master it struck stands by again. A cut strikes the
    first master, in its namespace: it is given the lead first if another has it."""
    leader = _wait("leader", lambda: client.leader())
    assert isinstance(leader, MasterInfo)
    if fault == "cut" and names[leader.endpoint] != "master":
        first = next(endpoint for endpoint, name in names.items() if name == "master")
        client.takeover(first)
        leader = _wait("the first master to lead", lambda: (found := client.leader()) and found.endpoint == first
                       and found)
        assert isinstance(leader, MasterInfo)
    name = names[leader.endpoint]
    state = cluster.state()
    assert state is not None
    process = psutil.Process(state.pids[name])
    started = time.monotonic()
    if fault == "kill":
        process.kill()
    elif fault == "stop":
        process.send_signal(signal.SIGSTOP)
    elif fault == "cut":
        assert namespace is not None, "a cut needs the first master in a namespace of its own"
        namespace.link(up=False)
    else:
        client.takeover()
    heard = _wait("switch of a new leader", lambda: watch.first_after(leader.epoch, started))
    assert isinstance(heard, float)
    _wait("nodes back", lambda: sum(node.state == "up" for node in client.nodes()) == nodes)
    taken = Takeover(fault, heard - started, heard - watch.last_of(leader.epoch, heard), time.monotonic() - started)
    if fault == "kill":
        process.wait(10)
        cluster.restart(name)
    elif fault == "stop":
        process.send_signal(signal.SIGCONT)
    elif fault == "cut":
        namespace.link(up=True)  # type: ignore[union-attr]
    _wait("standby again", lambda: any(master.endpoint == leader.endpoint and master.role is MasterRole.STANDBY
                                       and master.seen_s < 0.5 for master in client.masters()))
    return taken


def run_failover(cluster: LocalCluster, runs: int, faults: list[str], submissions: int, clients: int,
                 namespace: Namespace | None = None) -> FailoverResult:
    """``runs`` faults of the leader, the kinds in turn, while ``clients`` threads submit ``submissions``
    one-task jobs, paced over the runs, and a gang of one task per node runs; ``namespace``: the first
    master's, for cuts."""
    state = cluster.state()
    assert state is not None
    masters = cluster.masters()
    names = {bound.client: name for name, bound in masters.items()}
    watch = SwitchWatch([bound.switch for bound in masters.values()], cluster.keys if state.config.keys else None)
    user = getpass.getuser()
    accepted: dict[str, int] = {}
    longest = 0.0
    lock = threading.Lock()
    pace_s = max(0.0, runs * 4.0 * clients / max(1, submissions))

    def submit_share(index: int) -> None:
        nonlocal longest
        with cluster.client(state, timeout_s=2.0) as client:
            for number in range(index, submissions, clients):
                name = f"failover-{number}"
                asked = time.monotonic()
                job_id = client.submit(JobSpec(name=name, user=user, tasks=1, argv=["true"]), retry_s=_RETRY_S)
                with lock:
                    accepted[name] = job_id
                    longest = max(longest, time.monotonic() - asked)
                time.sleep(pace_s)

    takeovers: list[Takeover] = []
    with cluster.client(state, timeout_s=2.0) as client:
        nodes = len(client.nodes())
        gang = client.submit(JobSpec(name="gang", user=user, tasks=nodes, argv=["sleep", "3600"]))
        _wait("running gang", lambda: len(task_processes(cluster.home, gang)) >= nodes)
        gang_tasks = {process.pid for process in task_processes(cluster.home, gang)}
        threads = [threading.Thread(target=submit_share, args=(index,)) for index in range(clients)]
        for thread in threads:
            thread.start()
        for run in range(runs):
            takeovers.append(_fault_once(cluster, client, watch, names, faults[run % len(faults)], nodes, namespace))
        for thread in threads:
            thread.join(_WAIT_S * 5)
        ids = sorted(accepted.values())
        wait_for_ends(client, ids)
        known = {job.job_id: job for job in client.jobs(ids)}
        extra = [job for job in client.jobs(list(range(1, max(ids, default=gang) + 100)))
                 if job.job_id not in set(ids) and job.job_id != gang]
        gang_ran_on = client.job(gang).state is JobState.RUNNING and \
            {process.pid for process in task_processes(cluster.home, gang)} == gang_tasks
        stale = sum(node.stale_refused for node in client.nodes())
        client.cancel(gang, user)
    watch.close()
    completed = sum(job.state is JobState.COMPLETED for job in known.values())
    return FailoverResult(takeovers, submissions, len(accepted), completed, len(ids) - len(known), len(extra),
                          longest, gang_ran_on, stale)
