"""The cluster's one I/O server, which every rank of an I/O job writes to.

It serves one request at a time, as one shared disk or NFS server does, so
I/O contention appears as the cluster grows. ``fsync`` appends each block to
a real file and syncs it; ``fixed`` takes a fixed service time per request,
for runs that must be reproducible.
"""

import logging
import os
import signal
import time
from collections.abc import Callable
from pathlib import Path
from typing import Literal

import zmq
from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from gangsched.daemon.realtime import raise_priority, zmq_context
from gangsched.daemon.signals import SignalEvents
from gangsched.protocol.job_tokens import IO_REFUSED, IO_SERVED, is_io_token

log = logging.getLogger("gangsched.ioserver")

MAX_WRITE_BYTES = 64 << 20  # a larger message closes its connection unread


class IoServerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GANG_IO_")

    bind: str = Field("tcp://*:7072", description="REP endpoint the jobs write to (an ipc socket is made "
                      "writable by every account: each write's token says whose it is)")
    key: Path | None = Field(
        None, description="a key file (the master's --io-key): only writes that carry their job's token made with "
        "it are served; none: every write is"
    )
    mode: Literal["fixed", "fsync"] = Field("fixed", description="fixed service time or real fsync")
    service_us: int = Field(500, ge=0, description="service time of one request (fixed)")
    path: Path = Field(Path("/tmp/gangsched-io.dat"), description="file written in fsync mode")
    realtime_priority: int = Field(
        10, ge=0, le=99, description="it stands for a separate server: keep node load off it"
    )
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_file: Path | None = Field(None, description="log here, rotated at 10 MiB (3 kept), not to stderr")


def run_ioserver(settings: IoServerSettings) -> None:
    priority = settings.realtime_priority
    realtime = priority > 0 and raise_priority(priority, log)
    context = zmq_context(priority if realtime else None)
    key = None if settings.key is None else settings.key.read_bytes()
    socket = context.socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    socket.setsockopt(zmq.MAXMSGSIZE, MAX_WRITE_BYTES)
    socket.bind(settings.bind)
    if settings.bind.startswith("ipc://"):  # every account's jobs write here (the folder says who may enter)
        os.chmod(settings.bind.removeprefix("ipc://"), 0o666)
    serve = _fsync_writer(settings.path) if settings.mode == "fsync" else _fixed(settings.service_us)
    log.info("serving %s writes on %s, %s", settings.mode, settings.bind,
             "each with its job's token" if key else "from anyone (no --key)")
    refused = 0
    with SignalEvents([signal.SIGTERM, signal.SIGINT]) as signals:
        poller = zmq.Poller()
        poller.register(socket, zmq.POLLIN)
        poller.register(signals.fileno(), zmq.POLLIN)
        while True:
            ready = dict(poller.poll())
            if signals.fileno() in ready and signals.drain():
                break
            if socket in ready:
                frames = socket.recv_multipart()
                if len(frames) == 3 and (key is None or is_io_token(key, frames[0], frames[1])):
                    serve(frames[2])
                    socket.send(IO_SERVED)
                    continue
                socket.send(IO_REFUSED)  # unserved: no job's token, so no one's disk time
                refused += 1
                if refused & (refused - 1) == 0:  # at 1, 2, 4, 8, ...: said, and never a flood of lines
                    log.warning("refused %d writes without their job's token", refused)
    socket.close()
    context.term()


def _fixed(service_us: int) -> Callable[[bytes], None]:
    def serve(block: bytes) -> None:
        time.sleep(service_us / 1e6)

    return serve


def _fsync_writer(path: Path) -> Callable[[bytes], None]:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def serve(block: bytes) -> None:
        os.write(fd, block)
        os.fsync(fd)

    return serve
