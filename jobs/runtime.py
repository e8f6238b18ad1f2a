"""The runtime library of a task: who it is, barriers, progress, writes to the I/O server.

The node daemon tells each task about itself in its environment:
GANG_JOB_ID, GANG_RANK, GANG_SIZE, GANG_NODE, GANG_BARRIER_ADDR (rank 0 also
GANG_BARRIER_BIND), GANG_PROGRESS_FILE and, when the cluster has one,
GANG_IO_ADDR. Waits block in the kernel, never spin, so they show as non-CPU
time in the utilization the node daemon measures.
"""

import mmap
import os
from functools import cache

import zmq


def rank() -> int:
    return int(os.environ.get("GANG_RANK", "0"))


def size() -> int:
    return int(os.environ.get("GANG_SIZE", "1"))


def job_id() -> int:
    return int(os.environ.get("GANG_JOB_ID", "0"))


class Barrier:
    """Every rank sends to rank 0 and blocks for its reply; rank 0 replies once all arrived."""

    def __init__(self, my_rank: int, job_size: int, address: str, bind: str | None) -> None:
        self._rank = my_rank
        self._others = job_size - 1
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

    def wait(self) -> None:
        if self._socket is None:
            return
        if self._rank != 0:
            self._socket.send(b"")
            self._socket.recv()
            return
        arrived = [self._socket.recv_multipart()[0] for _ in range(self._others)]
        for identity in arrived:
            self._socket.send_multipart([identity, b""])

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
    """Synchronous writes to the cluster's one I/O server: each blocks until it is served."""

    def __init__(self, address: str) -> None:
        self._socket: zmq.Socket[bytes] = zmq.Context.instance().socket(zmq.REQ)
        self._socket.setsockopt(zmq.LINGER, 0)
        self._socket.connect(address)

    def write(self, data: bytes) -> None:
        self._socket.send(data)
        self._socket.recv()


@cache
def _barrier() -> Barrier:
    address = os.environ.get("GANG_BARRIER_ADDR", "")
    if size() > 1 and not address:
        raise RuntimeError("GANG_BARRIER_ADDR is not set: is this running under gangsched?")
    return Barrier(rank(), size(), address, os.environ.get("GANG_BARRIER_BIND"))


@cache
def _progress() -> Progress:
    return Progress(os.environ.get("GANG_PROGRESS_FILE"))


def barrier() -> None:
    """Wait until every rank of the job has called ``barrier`` as often as this one."""
    _barrier().wait()


def progress(count: int) -> None:
    """Publish this task's progress (rank 0's is shown as the job's barriers)."""
    _progress().set(count)


@cache
def _io_client() -> IoClient:
    address = os.environ.get("GANG_IO_ADDR")
    if not address:
        raise RuntimeError("GANG_IO_ADDR is not set: the cluster has no I/O server")
    return IoClient(address)


def io_write(data: bytes) -> None:
    """One synchronous write to the cluster's I/O server; returns once it is served."""
    _io_client().write(data)
