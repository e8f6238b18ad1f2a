"""A `gang` command ended with SIGTERM (kill, a batch system, a CI timeout) leaves nothing behind: the
cluster it started is brought down on the way out, as on Ctrl-C."""

import contextlib
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import IO

import psutil
import pytest

from gangsched.deploy.local import progress_folder
from tests.helpers.clusters import wait_until


@pytest.mark.live
def test_a_benchmark_killed_with_sigterm_brings_its_cluster_down(tmp_path):
    errors = (tmp_path / "stderr").open("w+b")
    # faulthandler: a benchmark that does not end is made to print where each thread of it is (SIGABRT)
    bench = subprocess.Popen([sys.executable, "-X", "faulthandler", "-m", "gangsched.cli", "bench", "switch",
                              "--nodes", "2", "--switches", "1000", "--quantum-ms", "100", "--baseline-s", "1"],
                             stdout=subprocess.DEVNULL, stderr=errors)
    started: list[psutil.Process] = []
    try:
        parent = psutil.Process(bench.pid)

        def daemons() -> list[psutil.Process]:
            try:
                children = parent.children(recursive=True)
                named = [" ".join(child.cmdline()) for child in children]
            except psutil.NoSuchProcess:  # one of them ended as we looked: look again
                return []
            return children if sum("gangsched.cli noded" in line for line in named) == 2 else []

        found = wait_until(daemons, 60, "the benchmark's master and node daemons")
        assert isinstance(found, list)
        started = found
        bench.send_signal(signal.SIGTERM)
        try:
            code = bench.wait(timeout=60)
        except subprocess.TimeoutExpired:
            bench.send_signal(signal.SIGABRT)
            bench.wait(timeout=30)
            code = None
        assert code == 128 + signal.SIGTERM, _said(errors)
        _, alive = psutil.wait_procs(started, timeout=30)
        alive = [process for process in alive if not _ended(process)]
        assert not alive, [" ".join(process.cmdline()) for process in alive]
    finally:  # a failure leaves nothing behind either
        for process in started:
            if process.is_running():
                process.kill()
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        errors.close()


def _said(errors: IO[bytes]) -> str:
    """The end of what the benchmark wrote to its standard error."""
    errors.seek(0)
    return "the benchmark's standard error ends:\n" + errors.read().decode(errors="replace")[-8000:]


def _ended(process: psutil.Process) -> bool:
    """Gone, or a zombie: ended, waiting for its reaper. An orphan's reaper may be this very process (a
    test before made it a subreaper, as a node daemon's process-tree containment does), which reaps it."""
    try:
        if process.status() != psutil.STATUS_ZOMBIE:
            return False
    except psutil.NoSuchProcess:
        return True
    with contextlib.suppress(ChildProcessError):
        os.waitpid(process.pid, os.WNOHANG)
    return True


def test_once_a_sigterm_unwinds_a_command_a_second_one_cannot_cut_its_cleanup_short():
    """`timeout` passes its own SIGTERM on beside one sent to the command: the first unwinds it, and
    from then on only SIGKILL ends it, so the cluster it started is always brought down."""
    from gangsched.cli.main import _unwind

    before = signal.getsignal(signal.SIGTERM)
    try:
        signal.signal(signal.SIGTERM, _unwind)
        try:
            signal.raise_signal(signal.SIGTERM)
        except SystemExit as unwinding:
            assert unwinding.code == 128 + signal.SIGTERM
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_IGN
        signal.raise_signal(signal.SIGTERM)  # ignored: the test goes on
    finally:
        signal.signal(signal.SIGTERM, before)


@pytest.mark.live
def test_a_cluster_start_ended_by_sigterm_half_way_leaves_no_daemon_behind(tmp_path):
    # SIGTERM once the master runs and before the nodes do: nothing a later `gang cluster down` reads
    # names them yet, so the start itself stops what it started
    home = str(tmp_path / "home")
    up = subprocess.Popen([sys.executable, "-m", "gangsched.cli", "cluster", "up", "--nodes", "2"],
                          env={**os.environ, "GANG_HOME": home}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(lambda: any("gangsched.cli master" in line for line in _command_lines(home)), 60,
                   "the cluster's master")
        up.send_signal(signal.SIGTERM)
        assert up.wait(timeout=60) == 128 + signal.SIGTERM
        wait_until(lambda: not _command_lines(home), 30, "every daemon of the cluster ended")
        run = progress_folder(Path(home))
        assert run == Path(home) or not run.exists(), f"the tasks' folder on the tmpfs left behind: {run}"
    finally:  # a failure leaves nothing behind either
        for process in psutil.process_iter():
            with contextlib.suppress(psutil.Error):
                if home in " ".join(process.cmdline()):
                    process.kill()
        if up.poll() is None:
            up.kill()
            up.wait()


def _command_lines(home: str) -> list[str]:
    """The command lines of the live processes that name ``home`` (the cluster's daemons name their folders)."""
    found = []
    for process in psutil.process_iter():
        with contextlib.suppress(psutil.Error):
            line = " ".join(process.cmdline())
            if home in line and not _ended(process):
                found.append(line)
    return found
