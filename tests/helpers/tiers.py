"""The tiers of the suite (docs/architecture.md, "Tests in tiers"): the fast tier starts no process."""

import _posixsubprocess  # type: ignore[import-not-found]
import contextlib
import os
import subprocess
from collections.abc import Iterator


class ProcessInFastTier(Exception):
    """A test of the fast tier started a process: it belongs to a tier that may (a mark of PROCESS_TIERS)."""


PROCESS_TIERS = ("live", "docker", "mpi")


# every way Python starts a process: subprocess and asyncio's through _fork_exec, multiprocessing's
# spawn through _posixsubprocess, its fork, pty and os.system
PROCESS_STARTS = [(subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec"), (os, "fork"), (os, "forkpty"),
                   (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system")]


@contextlib.contextmanager
def no_process_started(test: str) -> Iterator[None]:
    """While it lasts, every way of starting a process raises ``ProcessInFastTier``, naming ``test``."""

    def refused(*args: object, **kwargs: object) -> None:
        raise ProcessInFastTier(f"{test} starts a process: mark it {' or '.join(PROCESS_TIERS)}")

    saved = [(module, name, getattr(module, name)) for module, name in PROCESS_STARTS]
    for module, name, _ in saved:
        setattr(module, name, refused)
    try:
        yield
    finally:
        for module, name, original in saved:
            setattr(module, name, original)
