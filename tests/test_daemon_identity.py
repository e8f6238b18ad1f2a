"""A local cluster knows its daemons by pid and start: a pid recycled for another process is not one of
them, and a daemon stays one of them whatever the wall clock does (a step of the clock once made every
daemon of a chaos run look like a stranger: a killed node was started again beside itself, and the run's
cluster was left running when it ended)."""

import subprocess
import sys

import psutil
import pytest

from gangsched.deploy.local import _is_ours, _start_ticks
from tests.helpers.clusters import wait_until


@pytest.mark.live
def test_a_daemon_is_known_by_its_start_as_the_kernel_counts_it_until_it_is_gone():
    child = subprocess.Popen(["sleep", "30"])
    try:
        started = _start_ticks(child.pid)
        # another process (the CLI that stops a cluster another one started) reads the same start
        reading = f"from gangsched.deploy.local import _start_ticks; print(_start_ticks({child.pid}))"
        read_elsewhere = subprocess.run([sys.executable, "-c", reading], capture_output=True, text=True,
                                        check=True).stdout
        assert int(read_elsewhere) == started
        assert _is_ours(child.pid, started)
        assert not _is_ours(child.pid, started + 1)  # the same pid, started at another time: a recycled one
        child.kill()
        wait_until(lambda: psutil.Process(child.pid).status() == psutil.STATUS_ZOMBIE, 10, "the killed child")
        assert not _is_ours(child.pid, started)  # dead, not yet reaped
    finally:
        child.kill()
        child.wait()
    assert not _is_ours(child.pid, started)
    assert _start_ticks(child.pid) == -1
