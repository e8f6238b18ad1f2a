"""A job that fills the file system of the master's store: the store cannot commit, and still its owner
cancels it and its time limit ends it, since kills go out before their commit; once the space is back the
ends are written as they came."""

import contextlib
import getpass
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import LocalCluster, task_processes
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.clusters import wait_until

pytestmark = [pytest.mark.live,
              pytest.mark.skipif(os.geteuid() != 0, reason="a small file system to fill: root mounts it")]


@pytest.fixture
def cluster_on_a_small_store() -> Iterator[LocalCluster]:
    home = Path(tempfile.mkdtemp(prefix="gang-t-"))
    store = home / "master"
    store.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=16m,mode=0700", "tmpfs", str(store)], check=True)
    cluster = LocalCluster(home)
    try:
        cluster.up(ClusterConfig(nodes=3, quantum_ms=100, heartbeat_ms=100, node_kill_grace_s=1.0, http_bind=""))
        yield cluster
    finally:
        cluster.down()
        left = task_processes(home)
        subprocess.run(["umount", "-l", str(store)], check=False)
        shutil.rmtree(home, ignore_errors=True)
        assert not left, f"tasks left behind: {[p.pid for p in left]}"


def fill(folder: Path) -> Path:
    """A file that takes every byte left in ``folder``'s file system."""
    filler = folder / "filler"
    with open(filler, "wb") as file, contextlib.suppress(OSError):
        while True:
            file.write(b"\0" * (1 << 20))
            file.flush()
    return filler


def test_a_store_that_cannot_commit_still_lets_jobs_be_cancelled_and_timed_out(cluster_on_a_small_store):
    cluster = cluster_on_a_small_store
    state = cluster.state()
    assert state is not None
    user = getpass.getuser()
    with cluster.client(state, timeout_s=5.0) as client:
        cancelled = client.submit(JobSpec(name="fills", user=user, tasks=1, argv=["sleep", "600"]))
        limited = client.submit(JobSpec(name="limited", user=user, tasks=1, argv=["sleep", "600"], estimate_s=6))
        short = client.submit(JobSpec(name="short", user=user, tasks=1, argv=["sleep", "2"]))
        jobs = (cancelled, limited, short)
        wait_until(lambda: all(client.job(job).state is JobState.RUNNING for job in jobs), 20, "all three to run")
        filler = fill(cluster.home / "master")
        # the short job's end is the next write: its commit fails, and from then on the store cannot commit
        wait_until(lambda: not task_processes(cluster.home, short), 15, "the short job to end")
        wait_until(lambda: "the job store cannot commit" in cluster.log_path("master").read_text(), 15,
                   "the store to fail")
        assert client.cancel(cancelled, user).state is JobState.CANCELLED  # answered though nothing commits
        wait_until(lambda: not task_processes(cluster.home, cancelled), 15, "the cancelled job's task to end")
        wait_until(lambda: not task_processes(cluster.home, limited), 30, "the time limit to end the other")
        filler.unlink()
        wait_until(lambda: all(client.job(job).state.is_final for job in jobs), 30, "the ends, written at last")
        assert [client.job(job).state for job in jobs] == [JobState.CANCELLED, JobState.TIMEOUT, JobState.COMPLETED]
