"""srun's side of its step's standard streams (protocol/stream_frames.py): a ZeroMQ ROUTER the step's nodes
reach with the token srun made, their tasks' output written out as it comes (``-l``: each line after its
task's rank), srun's input sent to the task that reads it, and, for ``--pty``, the window's size to its
terminal."""

from __future__ import annotations

import os
import socket
import sys

import zmq

from gangsched.protocol.stream_frames import ERR, HELLO, IN, IN_END, OUT, OUT_END, TO_SRUN, WINCH
from gangsched.slurm.terminal import UserTerminal

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def own_address(endpoint: str) -> str:
    """Where the step's nodes reach srun: this host's address toward the master, loopback beside it."""
    if endpoint.startswith("tcp://"):
        host = endpoint[len("tcp://"):].rsplit(":", 1)[0].strip("[]")
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect((host, 9))  # no packet: the route's source address
            return str(probe.getsockname()[0])
    return "127.0.0.1"


class Streams:
    """The step's streams, as srun takes them: output written as it comes, its input sent to the task that
    reads it."""

    def __init__(self, address: str, label: bool, input_rank: int | None, terminal: UserTerminal | None = None) -> None:
        self._context = zmq.Context()
        self.socket = self._context.socket(zmq.ROUTER)
        port = self.socket.bind_to_random_port(f"tcp://{address}")
        self.address = f"tcp://{address}:{port}"
        self.token = os.urandom(16).hex()
        self._label = label and terminal is None
        self._input_rank = input_rank
        self._terminal = terminal  # --pty: the input task's streams are a terminal of this one's size
        self._input_node: bytes | None = None  # the node of the task that reads the input, once it said hello
        self._partial: dict[tuple[bytes, bytes], bytes] = {}  # (stream, rank) -> a line not ended yet (-l)
        self.open: set[tuple[bytes, bytes]] = set()  # (stream, rank) of every stream still open
        self.ended: set[bytes] = set()  # ranks both of whose streams ended
        self.input_open = input_rank is not None

    def spec(self) -> dict[str, Any]:
        return {"address": self.address, "token": self.token, "input_rank": self._input_rank,
                "pty": self.has_terminal}

    def take(self) -> None:
        """Every frame waiting, its bytes written out."""
        while True:
            try:
                node, *frames = self.socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 4 or frames[0] != self.token.encode() or frames[1] not in TO_SRUN:
                continue  # not of this step's nodes
            _, kind, rank, data = frames
            if kind == HELLO:
                self.open |= {(OUT, rank), (ERR, rank)}
                if self._input_rank is not None and rank == str(self._input_rank).encode():
                    self._input_node = node
                    self.send_size()
            elif kind in (OUT, ERR):
                self._write(kind, rank, data)
            else:
                stream = OUT if kind == OUT_END else ERR
                self._write(stream, rank, b"", end=True)
                self.open.discard((stream, rank))
                if (OUT, rank) not in self.open and (ERR, rank) not in self.open:
                    self.ended.add(rank)

    def _write(self, kind: bytes, rank: bytes, data: bytes, end: bool = False) -> None:
        out = sys.stdout.buffer if kind == OUT else sys.stderr.buffer
        if self._label:
            text = self._partial.pop((kind, rank), b"") + data
            lines = text.split(b"\n")
            rest = lines.pop()
            if rest and not end:
                self._partial[(kind, rank)] = rest
            elif rest:
                lines.append(rest)
            data = b"".join(rank + b": " + line + b"\n" for line in lines)
        if data:
            out.write(data)
            out.flush()

    def send_input(self, data: bytes) -> bool:
        """srun's input to the task that reads it: False while its node has not said hello."""
        if self._input_node is None or self._input_rank is None:
            return False
        rank = str(self._input_rank).encode()
        self.socket.send_multipart([self._input_node, IN if data else IN_END, rank, data])
        if not data:
            self.input_open = False
        return True

    @property
    def has_terminal(self) -> bool:
        return self._terminal is not None

    def send_size(self) -> None:
        """The user's terminal's size to the task's, once its node said hello (and on SIGWINCH)."""
        size = None if self._terminal is None else self._terminal.size()
        if size is not None and self._input_node is not None:
            self.socket.send_multipart([self._input_node, WINCH, str(self._input_rank).encode(), size])

    def close(self) -> None:
        self.socket.close(linger=0)
        self._context.term()
