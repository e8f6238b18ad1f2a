"""The tiers of the suite (docs/architecture.md, "Tests in tiers"): the fast tier starts no process."""

import _posixsubprocess
import os
import subprocess


class ProcessInFastTier(Exception):
    """A test of the fast tier started a process: it belongs to a tier that may (a mark of PROCESS_TIERS)."""


PROCESS_TIERS = ("live", "docker", "mpi")


# every way Python starts a process: subprocess and asyncio's through _fork_exec, multiprocessing's
# spawn through _posixsubprocess, its fork, pty and os.system
PROCESS_STARTS = [(subprocess, "_fork_exec"), (_posixsubprocess, "fork_exec"), (os, "fork"), (os, "forkpty"),
                   (os, "posix_spawn"), (os, "posix_spawnp"), (os, "system")]
