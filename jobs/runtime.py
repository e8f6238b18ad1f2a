"""The runtime library of a task: who it is, barriers, progress, writes to the I/O server.

The node daemon tells each task about itself in its environment:
GANG_JOB_ID, GANG_RANK, GANG_SIZE, GANG_NODE, GANG_BARRIER_ADDR (rank 0 also
GANG_BARRIER_BIND), GANG_JOB_TOKEN (what rank 0's barrier checks its peers by),
GANG_PROGRESS_FILE and, when the cluster has one, GANG_IO_ADDR and
GANG_IO_TOKEN. Waits block in the kernel, never spin, so they show as non-CPU
time in the utilization the node daemon measures.

Migration is checkpoint and restart. A task that can save its state says so
with ``on_checkpoint(save)``; the master then may ask for a checkpoint (the
node daemon sends SIGUSR1, and GANG_CHECKPOINT names the file for this rank's
state). It is taken at a barrier, so that every rank saves the same iteration:
rank 0, asked, answers the barrier with "checkpoint", every rank writes
``save()`` and exits with ``CHECKPOINTED``. Restarted on its new node with
GANG_RESTORE=1, the task reads its state back with ``restored()``.
"""

import hmac
import mmap
import os
import signal
import sys
from collections.abc import Callable
from functools import cache
from pathlib import Path

import zmq

from gangsched.protocol import task_environment
from gangsched.protocol.exits import CHECKPOINTED
from gangsched.protocol.job_tokens import IO_SERVED


def rank() -> int:
    return int(os.environ.get(task_environment.RANK, "0"))


def size() -> int:
    return int(os.environ.get(task_environment.SIZE, "1"))


def job_id() -> int:
    return int(os.environ.get(task_environment.JOB_ID, "0"))


_GO, _CHECKPOINT = b"", b"c"


class Barrier:
    """Every rank sends to rank 0 and blocks for its reply; rank 0 replies once all arrived.

    ``wait`` returns whether the job checkpoints at this barrier: rank 0 decides, from ``asked``. A rank
    arrives with the launch's ``token``: rank 0 counts each peer once a barrier, and drops whatever else
    reaches its socket (over TCP anyone may connect), unanswered.
    """

    def __init__(self, my_rank: int, job_size: int, address: str, bind: str | None, token: bytes = b"") -> None:
        self._rank = my_rank
        self._others = job_size - 1
        self._token = token
        self._socket: zmq.Socket[bytes] | None = None
        if self._others == 0:
            return
        context: zmq.Context[zmq.Socket[bytes]] = zmq.Context.instance()
        if my_rank == 0:
            self._socket = context.socket(zmq.ROUTER)
            self._socket.bind(bind or address)
        else:
            self._socket = context.socket(zmq.DEALER)
            self._socket.connect(address)
        self._socket.setsockopt(zmq.LINGER, 0)

    def wait(self, asked: bool = False) -> bool:
        if self._socket is None:
            return asked
        if self._rank != 0:
            self._socket.send(self._token)
            return self._socket.recv() == _CHECKPOINT
        arrived: list[bytes] = []
        while len(arrived) < self._others:
            frames = self._socket.recv_multipart()
            if len(frames) == 2 and hmac.compare_digest(frames[1], self._token) and frames[0] not in arrived:
                arrived.append(frames[0])
        answer = _CHECKPOINT if asked else _GO
        for identity in arrived:
            self._socket.send_multipart([identity, answer])
        return asked

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()


class Progress:
    """A counter the node daemon reads at every quantum boundary: a store into shared memory."""

    def __init__(self, path: str | None) -> None:
        self._map: mmap.mmap | None = None
        if path:
            with open(path, "r+b") as file:
                self._map = mmap.mmap(file.fileno(), 8)

    def set(self, count: int) -> None:
        if self._map is not None:
            self._map[:8] = count.to_bytes(8, "little")


class IoClient:
    """Synchronous writes to the cluster's one I/O server: each blocks until it is served. Each carries the
    job's id and its token for the server (jobs/ioserver.py)."""

    def __init__(self, address: str, job: int, token: str) -> None:
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(address)
        self._credentials = [str(job).encode(), token.encode()]

    def write(self, data: bytes) -> None:
        self._socket.send_multipart([*self._credentials, data])
        if self._socket.recv() != IO_SERVED:
            raise RuntimeError("the I/O server refused the write: this job's GANG_IO_TOKEN is not its")


@cache
def _barrier() -> Barrier:
    address = os.environ.get(task_environment.BARRIER_ADDR, "")
    if size() > 1 and not address:
        raise RuntimeError("GANG_BARRIER_ADDR is not set: is this running under gangsched?")
    return Barrier(rank(), size(), address, os.environ.get(task_environment.BARRIER_BIND),
                   os.environ.get(task_environment.JOB_TOKEN, "").encode())


@cache
def _progress() -> Progress:
    return Progress(os.environ.get(task_environment.PROGRESS_FILE))


class _Checkpointing:
    save: Callable[[], bytes] | None = None
    asked = False


def on_checkpoint(save: Callable[[], bytes]) -> None:
    """Make this task migratable: ``save`` returns its state, to be given back by ``restored``."""
    _Checkpointing.save = save
    signal.signal(signal.SIGUSR1, _asked)


def _asked(signum: int, frame: object) -> None:
    _Checkpointing.asked = True


def restored() -> bytes | None:
    """The state saved before this task migrated, or None on a first start."""
    path = os.environ.get(task_environment.CHECKPOINT)
    if not path or os.environ.get(task_environment.RESTORE) != "1":
        return None
    return Path(path).read_bytes()


def barrier() -> None:
    """Wait until every rank of the job has called ``barrier`` as often as this one.

    If the job is migrating, every rank saves its state here and exits instead.
    """
    if _barrier().wait(_Checkpointing.asked and _Checkpointing.save is not None):
        _save_and_exit()


def _save_and_exit() -> None:
    save, path = _Checkpointing.save, os.environ.get(task_environment.CHECKPOINT)
    if save is None or not path:
        raise RuntimeError("asked to checkpoint, but this task has no checkpoint hook or GANG_CHECKPOINT")
    state = save()
    temporary = Path(f"{path}.tmp")
    temporary.parent.mkdir(mode=0o700, exist_ok=True)  # the job's folder, in the user's own
    with open(os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as file:
        file.write(state)
    temporary.replace(path)  # a restart never reads half a state
    sys.stdout.flush()
    os._exit(CHECKPOINTED)


def progress(count: int) -> None:
    """Publish this task's progress (rank 0's is shown as the job's barriers)."""
    _progress().set(count)


@cache
def _io_client() -> IoClient:
    address = os.environ.get(task_environment.IO_ADDR)
    if not address:
        raise RuntimeError("GANG_IO_ADDR is not set: the cluster has no I/O server")
    return IoClient(address, job_id(), os.environ.get(task_environment.IO_TOKEN, ""))


def io_write(data: bytes) -> None:
    """One synchronous write to the cluster's I/O server; returns once it is served."""
    _io_client().write(data)
