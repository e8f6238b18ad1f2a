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

log = logging.getLogger("gangsched.ioserver")


class IoServerSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GANG_IO_")

    bind: str = Field("tcp://*:7072", description="REP endpoint the jobs write to")
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
    socket = context.socket(zmq.REP)
    socket.setsockopt(zmq.LINGER, 0)
    socket.bind(settings.bind)
    serve = _fsync_writer(settings.path) if settings.mode == "fsync" else _fixed(settings.service_us)
    log.info("serving %s writes on %s", settings.mode, settings.bind)
    with SignalEvents([signal.SIGTERM, signal.SIGINT]) as signals:
        poller = zmq.Poller()
        poller.register(socket, zmq.POLLIN)
        poller.register(signals.fileno(), zmq.POLLIN)
        while True:
            ready = dict(poller.poll())
            if signals.fileno() in ready and signals.drain():
                break
            if socket in ready:
                serve(socket.recv())
                socket.send(b"")
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
