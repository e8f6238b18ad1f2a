"""Both daemons' loops outlive an unexpected exception in their switch path."""

import getpass
import subprocess
import sys
from pathlib import Path

import pytest

from gangsched.client.master_client import MasterClient
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import wait_until

pytestmark = pytest.mark.live
PROJECT = Path(__file__).resolve().parents[1]


def faulty(target: str, calls: str, *arguments: str) -> subprocess.Popen[bytes]:
    return subprocess.Popen([sys.executable, "-m", "tests.faulty", target, calls, "--", *arguments], cwd=PROJECT,
                            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def test_a_tick_and_a_switch_that_raise_are_logged_and_the_daemons_go_on(tmp_path):
    home = tmp_path / "home"
    home.mkdir(mode=0o700)
    home.chmod(0o700)
    endpoint = f"ipc://{home}/master.sock"
    master_log, node_log = home / "master.log", home / "node.log"
    daemons = [
        faulty("gangsched.master.core:MasterCore.tick", "5,6,7", "master", "--bind", endpoint,
               "--switch-bind", f"ipc://{home}/switch.sock", "--report-bind", f"ipc://{home}/report.sock",
               "--state-dir", str(home / "state"), "--quantum-ms", "100", "--heartbeat-ms", "100",
               "--log-file", str(master_log)),
        faulty("gangsched.noded.loop:NodeDaemon._apply", "8", "noded", "--master", endpoint, "--name", "n1",
               "--processors", "1", "--spool-dir", str(home / "spool"), "--peer-transport", "ipc",
               "--log-file", str(node_log)),
    ]
    try:
        with MasterClient(endpoint) as client:
            wait_until(
                lambda: master_log.exists() and "call 7" in master_log.read_text(),
                20,
                "three failed ticks in the master's log",
            )
            wait_until(lambda: node_log.exists() and "call 8" in node_log.read_text(), 20,
                       "a failed switch in the node's log")
            assert "the switch failed; the daemon goes on" in master_log.read_text()
            assert "the switch failed; the daemon goes on" in node_log.read_text()
            job = client.submit(JobSpec(name="after", user=getpass.getuser(), tasks=1, argv=["true"]))
            info = wait_until(lambda: (found := client.job(job)).state.is_final and found, 20, "the job to end")
            assert info.state is JobState.COMPLETED
        assert [daemon.poll() for daemon in daemons] == [None, None], "a daemon exited"
    finally:
        for daemon in reversed(daemons):
            daemon.terminate()
            daemon.wait(15)
