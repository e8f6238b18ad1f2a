"""The policy core on a real local cluster: migration by checkpoint/restart, time limits."""

import pytest

from gangsched.bench.migration import run_migration
from gangsched.bench.mix import job_spec
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.protocol.messages import JobState
from tests.conftest import task_processes, wait_until

pytestmark = pytest.mark.live


def test_a_job_migrates_between_nodes_and_continues_from_its_checkpoint(start_cluster):
    cluster = start_cluster(nodes=4, policy="mgs")
    run = run_migration(cluster.client, cluster.home / "checkpoints")
    assert run.moved_from == ["node1"] and run.moved_to == ["node4"]
    assert run.checkpointed_at >= run.barriers_before >= 5  # saved where it stood, not from scratch
    # from zero it would need checkpointed_at iterations of 100 ms to get past the checkpoint
    assert run.seconds_to_catch_up < min(1.5, run.checkpointed_at * 0.1 / 2)
    assert 0 < run.cost_s < 5
    assert [p.environ()["GANG_NODE"] for p in task_processes(cluster.home, run.job)] == []  # cancelled


def test_a_job_past_its_time_limit_ends_as_timeout(start_cluster):
    cluster = start_cluster(nodes=2, policy="easy")
    forever = SyntheticJob("timed", iterations=0)
    job = cluster.client.submit(job_spec(forever, 2, estimate_s=1.0))
    info = wait_until(lambda: (found := cluster.client.job(job)).state.is_final and found, 20, "the time limit")
    assert info.state is JobState.TIMEOUT and "time limit is 1 s" in info.reason
    assert info.ran_s >= 1.0
    wait_until(lambda: not task_processes(cluster.home, job), 10, "its tasks to end")
