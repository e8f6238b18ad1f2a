"""The policy core on a real local cluster: migration by checkpoint/restart, time limits, replay."""

import getpass
import os
import subprocess
import sys
from pathlib import Path

import pytest

from gangsched.bench.migration import run_migration
from gangsched.deploy.local import task_processes
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.jobs.synthetic_specs import job_spec
from gangsched.protocol.records import JobState
from gangsched.workload.swf import modelled_job, read_swf, write_swf
from tests.helpers.clusters import wait_until

pytestmark = pytest.mark.live


def mode(path: Path) -> int:
    return path.stat().st_mode & 0o777


def test_a_job_migrates_between_nodes_and_continues_from_its_checkpoint(start_cluster):
    cluster = start_cluster(nodes=4, policy="mgs")
    run = run_migration(cluster.client)
    assert run.moved_from == ["node1"] and run.moved_to == ["node4"]
    assert run.checkpointed_at >= run.barriers_before >= 5  # saved where it stood, not from scratch
    mine = cluster.home / "checkpoints" / getpass.getuser()
    saved = mine / f"job-{run.job}" / "rank-0"
    assert int(saved.read_bytes()) == run.checkpointed_at
    # a user's checkpoints are theirs alone: other jobs cannot list or read them
    assert [mode(path) for path in (mine, saved.parent, saved)] == [0o700, 0o700, 0o600]
    # going on from the checkpoint; from zero it would need checkpointed_at iterations of 100 ms
    assert run.checkpointed_at < run.barriers_after <= run.checkpointed_at + 3
    assert run.cost_s > 0  # measured: how much it is, against the work it saves, is gang bench migration's

    assert [p.environ()["GANG_NODE"] for p in task_processes(cluster.home, run.job)] == []  # cancelled


def test_a_job_past_its_time_limit_ends_as_timeout(start_cluster):
    cluster = start_cluster(nodes=2, policy="easy")
    forever = SyntheticJob("timed", iterations=0)
    job = cluster.client.submit(job_spec(forever, 2, estimate_s=1.0))
    info = wait_until(lambda: (found := cluster.client.job(job)).state.is_final and found, 20, "the time limit")
    assert info.state is JobState.TIMEOUT and "time limit is 1 s" in info.reason
    assert info.ran_s >= 1.0
    wait_until(lambda: not task_processes(cluster.home, job), 10, "its tasks to end")


def test_gang_replay_runs_a_trace_live_and_prints_the_prediction_beside_it(tmp_path):
    trace = tmp_path / "tiny.swf"
    records = [modelled_job(job_id, submit, run, procs)
               for job_id, (submit, run, procs) in enumerate([(0, 2, 2), (0.5, 1, 1), (1, 1, 2), (1.2, 1, 1)], 1)]
    write_swf(trace, records, ["; MaxProcs: 2"])
    result = subprocess.run(
        [sys.executable, "-m", "gangsched.cli", "replay", str(trace), "--speedup", "1", "--min-run-s", "0.5",
         "--nodes", "2", "--policy", "easy", "--quantum-ms", "100", "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "live run vs the simulator's prediction" in result.stdout
    completed = next(line for line in result.stdout.splitlines() if "jobs completed" in line)
    assert completed.split("│")[2].strip() == "4.00"  # every job ended well, live
    live = read_swf(tmp_path / "out" / "replay-live.swf").jobs
    assert len(live) == 4 and all(job.wait >= 0 for job in live)


def test_gang_replay_of_paired_gang_scheduling_simulates_it_quantum_by_quantum(tmp_path):
    trace = tmp_path / "tiny.swf"
    records = [modelled_job(job_id, submit, run, procs)
               for job_id, (submit, run, procs) in enumerate([(0, 2, 2), (0.2, 2, 2), (0.4, 1, 1)], 1)]
    write_swf(trace, records, ["; MaxProcs: 2"])
    result = subprocess.run(
        [sys.executable, "-m", "gangsched.cli", "replay", str(trace), "--speedup", "1", "--min-run-s", "1",
         "--nodes", "2", "--policy", "paired", "--utilization", "30-40", "--quantum-ms", "100",
         "--out", str(tmp_path / "out")],
        capture_output=True, text=True, timeout=180, env={**os.environ, "COLUMNS": "200"},
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "the program alone: launch" in result.stdout
    completed = next(line for line in result.stdout.splitlines() if "jobs completed" in line)
    assert [cell.strip() for cell in completed.split("│")[2:4]] == ["3.00", "3.00"]
    simulated = read_swf(tmp_path / "out" / "replay-sim.swf").jobs
    # jobs of 30-40 % pair: the simulated schedule runs the two 2-node jobs side by side
    assert simulated[1].wait < 1.0 and simulated[1].run_time < 2 * records[1].run_time
