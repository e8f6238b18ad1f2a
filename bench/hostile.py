"""Hostile clients against a live local cluster, and what must hold against them.

``flood``: one client sends junk frames as fast as it can, for at least three
quanta; the slot switches must keep their beat (the longest gap between two,
from their send times). With ``submissions`` the frames are single job
submissions instead (one-task ``/bin/true`` jobs, each with a token of its
own), which the master takes and runs: a user's script gone wrong.
``fuzz``: fuzzed frames (``bench/fuzz.py``) on each socket a client or a task
can reach: the master's client socket, its report socket, and the PMI channel
of MPI tasks; afterwards no daemon has exited, the master answers a query, and
a new job completes.
"""

import getpass
import random
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

import zmq

from gangsched.bench.fuzz import client_messages, frames, node_messages, valid_frames
from gangsched.client.master_client import RequestRefused
from gangsched.deploy.local import ClusterState, LocalCluster
from gangsched.protocol.codec import decode, encode
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import NodeQuery, SlotSwitch, Submit
from gangsched.protocol.records import JobSpec, JobState, MpiKind

_WAIT_S = 120.0


@dataclass(frozen=True)
class FloodResult:
    kind: str  # "junk frames" or "single submissions"
    frames: int  # sent: at least the number asked for, more if they took less than three quanta
    seconds: float  # from the first frame until the master had answered the last
    switches: int  # sent in that time
    longest_gap_ms: float  # between two consecutive switches' send times
    quantum_ms: int

    @property
    def longest_gap_quanta(self) -> float:
        return self.longest_gap_ms / self.quantum_ms


@dataclass(frozen=True)
class FuzzResult:
    socket: str
    frames: int
    seconds: float
    daemons_exited: list[str]
    queue_answers: bool
    new_job: JobState
    fuzz_jobs: dict[str, int] | None = None  # PMI: how its jobs ended (e.g. failed: 50)
    reason: str = ""  # one of their reasons


_FLOOD_MIN_QUANTA = 3  # a fast host sends thousands of frames inside one quantum: no switch to judge


def flood(cluster: LocalCluster, frames_count: int, quantum_ms: int, seed: int = 1,
          submissions: bool = False) -> FloodResult:
    state = _state(cluster)
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    switches = context.socket(zmq.SUB)
    switches.setsockopt(zmq.SUBSCRIBE, b"")
    switches.setsockopt(zmq.RCVHWM, 0)
    switches.connect(f"ipc://{cluster.home}/switch.sock")
    flooder = context.socket(zmq.DEALER)
    flooder.setsockopt(zmq.LINGER, 0)
    flooder.connect(state.master)
    rng = random.Random(seed)
    if submissions:  # made before the clock starts, each once: a token is a submission
        spec = JobSpec(name="flood", user=getpass.getuser(), tasks=1, argv=["/bin/true"], cwd="/", env={})
        made = [encode(Submit(spec=spec, token=f"flood-{seed}-{index}")) for index in range(frames_count)]
    else:
        made = [b"\xc1" + rng.randbytes(rng.randrange(0, 64)) for _ in range(1000)]
    sent_ns: list[int] = []
    try:
        if not switches.poll(10_000):
            raise RuntimeError("no switch from the master within 10 s")
        start = time.monotonic_ns()
        shortest_end = start + _FLOOD_MIN_QUANTA * quantum_ms * 1_000_000
        sent = 0
        while sent < frames_count or (not submissions and time.monotonic_ns() < shortest_end):
            while not flooder.poll(0, zmq.POLLOUT):  # the master's queue for us is full: take replies
                _drain(flooder)
                _collect(switches, sent_ns)
            flooder.send(made[sent % len(made)])
            sent += 1
            _drain(flooder)
            _collect(switches, sent_ns)
        _through(flooder, lambda: _collect(switches, sent_ns))
        end = time.monotonic_ns()
        _collect(switches, sent_ns)
    finally:
        switches.close()
        flooder.close()
    inside = [switch for switch in sent_ns if start <= switch <= end]
    gaps = [later - earlier for earlier, later in zip([start, *inside], [*inside, end])]
    return FloodResult("single submissions" if submissions else "junk frames", sent, (end - start) / 1e9,
                       len(inside), max(gaps) / 1e6, quantum_ms)


def drained(cluster: LocalCluster) -> None:
    """Wait until no job is left pending or running (a submission flood's jobs have run)."""
    with cluster.client(_state(cluster), timeout_s=30.0) as client:
        _wait(lambda: not client.jobs(), "the flood's jobs to end")


def fuzz_master(cluster: LocalCluster, socket_name: str, frames_count: int, seed: int = 1) -> FuzzResult:
    """``socket_name``: "client" (the ROUTER; replies read) or "report" (the PULL)."""
    state = _state(cluster)
    rng = random.Random(seed)
    context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
    if socket_name == "client":
        valid = valid_frames(client_messages(getpass.getuser()))
        socket, endpoint = context.socket(zmq.DEALER), state.master
    else:
        valid = valid_frames(node_messages())
        socket, endpoint = context.socket(zmq.PUSH), f"ipc://{cluster.home}/report.sock"
    socket.setsockopt(zmq.LINGER, 0)
    socket.connect(endpoint)
    start = time.monotonic()
    try:
        for frame in frames(rng, valid, frames_count):
            parts = [frame] if rng.random() < 0.9 else [frame] * rng.randrange(0, 3) + [b""]
            socket.send_multipart(parts or [b""])
            if socket_name == "client":
                _drain(socket)
        if socket_name == "client":
            _through(socket, lambda: None)
    finally:
        socket.close()
    return _afterwards(cluster, socket_name, frames_count, time.monotonic() - start)


def fuzz_pmi(cluster: LocalCluster, frames_count: int, lines_per_task: int = 50, seed: int = 1,
             kind: MpiKind = MpiKind.PMI1) -> FuzzResult:
    """Jobs of one MPI task per node whose tasks speak fuzzed PMI (``kind``: PMI-1 or PMI-2),
    ``frames_count`` lines or commands in all."""
    state = _state(cluster)
    nodes = state.config.nodes
    jobs = max(1, frames_count // (lines_per_task * nodes))
    start = time.monotonic()
    with cluster.client(state) as client:
        job_ids = [client.submit(JobSpec(
            name=f"{kind}-fuzz-{index}", user=getpass.getuser(), tasks=nodes, mpi=kind,
            argv=[sys.executable, "-m", "gangsched.bench.pmi_fuzz_task", str(seed + index), str(lines_per_task),
                  kind.value],
        )) for index in range(jobs)]
        _wait(lambda: all(job.state.is_final for job in client.jobs(job_ids)), "the PMI fuzz jobs to end")
        ended = client.jobs(job_ids)
    result = _afterwards(cluster, kind.value, jobs * nodes * lines_per_task, time.monotonic() - start)
    states = Counter(job.state.value for job in ended)
    return replace(result, fuzz_jobs=dict(states), reason=ended[0].reason)


def _afterwards(cluster: LocalCluster, socket_name: str, frames_count: int, seconds: float) -> FuzzResult:
    state = _state(cluster)
    exited = [name for name, alive in cluster.alive().items() if not alive]
    with cluster.client(state) as client:
        # what the fuzz submitted may still run or wait: out of the way of the check
        for waiting in client.jobs():
            try:
                client.cancel(waiting.job_id, getpass.getuser())
            except RequestRefused as refused:  # it ended meanwhile
                if refused.code is not ErrorCode.JOB_FINISHED:
                    raise
        answers = isinstance(client.jobs(include_finished=True), list)
        job = client.submit(JobSpec(name="after-fuzz", user=getpass.getuser(), tasks=state.config.nodes,
                                    argv=["true"]))
        _wait(lambda: client.job(job).state.is_final, "the job after the fuzz to end")
        new_job = client.job(job).state
    return FuzzResult(socket_name, frames_count, seconds, exited, answers, new_job)


def _state(cluster: LocalCluster) -> ClusterState:
    state = cluster.state()
    if state is None:
        raise RuntimeError(f"no cluster in {cluster.home}")
    return state


def _wait(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + _WAIT_S
    while not condition():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out after {_WAIT_S:g} s waiting for {what}")
        time.sleep(0.1)


def _drain(socket: zmq.Socket[bytes]) -> None:
    while socket.poll(0):
        socket.recv_multipart()


def _through(socket: zmq.Socket[bytes], meanwhile: Callable[[], None]) -> None:
    """Until the master got through every frame ``socket`` sent: a query sent after them is
    answered after them. Sent again each second, as a reply to a client whose queue was full
    is dropped."""
    deadline = time.monotonic() + _WAIT_S
    while True:
        socket.send(encode(NodeQuery()))
        asked = time.monotonic()
        while time.monotonic() < asked + 1.0:
            if _answered_node_query(socket):
                return
            meanwhile()
        if time.monotonic() > deadline:
            raise RuntimeError(f"the master did not answer within {_WAIT_S:g} s of the frames")


def _answered_node_query(socket: zmq.Socket[bytes]) -> bool:
    while socket.poll(10):
        # a frame sent as [b"", body] is answered as a REQ's is: [b"", reply]
        if decode(socket.recv_multipart()[-1]).type == "node_list":
            return True
    return False


def _collect(switches: zmq.Socket[bytes], sent_ns: list[int]) -> None:
    while switches.poll(0):
        message = decode(switches.recv())
        if isinstance(message, SlotSwitch):
            sent_ns.append(message.sent_ns)
