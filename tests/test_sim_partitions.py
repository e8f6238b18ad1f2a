"""Partitions in the simulator: the master's tier rules (policy/tiers.py) over the simulator's jobs,
one policy per partition, suspension as a rate of 0 with the work kept."""

import csv as csv_module

import pytest
from click.testing import CliRunner

from gangsched.cli.group import cli
from gangsched.policy.catalog import Choice
from gangsched.policy.partitions import Partition, PreemptMode
from gangsched.policy.windows import Reservation
from gangsched.sim.engine import simulate
from gangsched.sim.partitioned import PartitionedPolicy
from gangsched.sim.partitions_experiment import S8
from gangsched.sim.report import ExperimentOptions
from gangsched.sim.sim_job import SimJob
from gangsched.workload.swf import modelled_job, write_swf

NODES = {f"n{index}": 1 for index in range(1, 9)}


def partitions(batch_mode: PreemptMode) -> list[tuple[Partition, Choice]]:
    return [(Partition("batch", None, default=True, priority_tier=1, preempt_mode=batch_mode), Choice("gs", mpl=3)),
            (Partition("debug", frozenset(list(NODES)[:4]), priority_tier=2), Choice("easy"))]


def run(batch_mode: PreemptMode) -> dict[int, tuple[float | None, float | None]]:
    jobs = [SimJob(1, 0.0, 100.0, 100.0, 8), SimJob(2, 10.0, 20.0, 20.0, 2), SimJob(3, 15.0, 50.0, 60.0, 4)]
    policy = PartitionedPolicy(partitions(batch_mode), NODES, 100.0,
                               lambda job: "debug" if job.procs <= 2 else "batch")
    simulate(jobs, policy)
    return {job.job_id: (job.start, job.end) for job in jobs}


def test_a_debug_job_suspends_the_batch_gang_whose_work_waits_for_it():
    # job 1 runs alone on all 8 nodes; job 2 (debug) suspends it from 10 to 30; job 3 (batch) starts at 15
    # on nodes the debug job does not hold, alone, then shares with job 1 once job 1 resumes (two rows)
    assert run(PreemptMode.SUSPEND) == {1: (0.0, 155.0), 2: (10.0, 30.0), 3: (15.0, 100.0)}


def test_without_preemption_the_debug_job_waits_for_the_batch_gang():
    # job 2 waits until job 1 leaves its nodes; job 3 time-shares with job 1 from 15 (a second row)
    placed = run(PreemptMode.OFF)
    assert placed[2][0] is not None and placed[2][0] >= 100.0 and placed[1][1] is not None and placed[1][1] > 100.0


def test_the_simulator_suspends_and_refuses_a_partition_whose_gangs_would_be_requeued():
    with pytest.raises(ValueError, match="partition batch: the simulator suspends preempted gangs"):
        PartitionedPolicy(partitions(PreemptMode.REQUEUE), NODES, 100.0, lambda job: "batch")


def test_gang_sim_run_takes_the_partitions_of_a_configuration_file(tmp_path):
    config = tmp_path / "gangsched.toml"
    config.write_text('[[partitions]]\nname = "batch"\npolicy = "bgs"\npreempt_mode = "suspend"\n'
                      '[[partitions]]\nname = "debug"\nnodes = "node[1-8]"\npriority_tier = 2\npolicy = "easy"\n')
    jobs = [modelled_job(index, 10.0 * index, 60.0, 1 + index % 12) for index in range(1, 41)]
    trace = tmp_path / "small.swf"
    write_swf(trace, jobs, ["; MaxProcs: 16"])
    result = CliRunner().invoke(cli, ["sim", "run", str(trace), "--config", str(config), "--csv",
                                      str(tmp_path / "jobs.csv")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    assert "bgs-8, 16 procs: 40 jobs, 0 unfinished" in result.output  # the default partition's policy names it
    refused = tmp_path / "refused.toml"
    refused.write_text(config.read_text().replace('"suspend"', '"requeue"'))
    result = CliRunner().invoke(cli, ["sim", "run", str(trace), "--config", str(refused)])
    assert result.exit_code == 2 and "the simulator suspends preempted gangs" in result.output


@pytest.mark.live
def test_experiment_s8_writes_its_table_csv_and_plot(tmp_path):
    text = S8.run(tmp_path, ExperimentOptions(jobs=300, workers=1), lambda _: None)
    assert "The first 300 jobs of KTH-SP2-1996-2.1-cln.swf.gz" in text and "| preemption | debug |" in text
    assert (tmp_path / "s8.csv").read_text().startswith("run,jobs,count,mean_wait_s,mean_bounded_slowdown")
    assert (tmp_path / "s8.png").stat().st_size > 0


@pytest.mark.parametrize("policy", ["easy", "bgs", "gs"])
def test_the_simulator_keeps_every_job_off_a_maintenance_window_with_the_masters_code(policy):
    # every node reserved from 100 to 200: no job may run in it, and jobs that fit before it run before it
    jobs = [SimJob(index, 5.0 * index, run, run * 1.5, procs)
            for index, (run, procs) in enumerate([(30.0, 4), (200.0, 8), (10.0, 2), (60.0, 8), (20.0, 1),
                                                  (5.0, 8), (300.0, 3), (15.0, 6)], start=1)]
    window = Reservation("maint", frozenset(NODES), 100.0, 200.0)
    policy_ = PartitionedPolicy([(Partition("batch", None, default=True), Choice(policy, mpl=2))], NODES, 450.0,
                                lambda job: "batch", (window,))
    simulate(jobs, policy_)
    assert all(job.end is not None for job in jobs)
    for job in jobs:
        assert job.end <= 100.0 or job.start >= 200.0, (job.job_id, job.start, job.end)
    assert any(job.end <= 100.0 for job in jobs) and any(job.start >= 200.0 for job in jobs)


def test_gang_sim_run_takes_maintenance_windows(tmp_path):
    jobs = [modelled_job(index, 10.0 * index, 60.0, 1 + index % 12) for index in range(1, 41)]
    trace = tmp_path / "small.swf"
    write_swf(trace, jobs, ["; MaxProcs: 16"])
    csv = tmp_path / "jobs.csv"
    result = CliRunner().invoke(cli, ["sim", "run", str(trace), "--policy", "easy", "--reservation",
                                      "maint=node[1-16]@2:00+5:00", "--csv", str(csv)], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    rows = list(csv_module.DictReader(csv.open()))
    first = min(float(row["submit"]) for row in rows)
    for row in rows:
        assert float(row["end"]) <= first + 120 or float(row["start"]) >= first + 420, row
    refused = CliRunner().invoke(cli, ["sim", "run", str(trace), "--reservation", "maint=node99@2:00+5:00"])
    assert refused.exit_code == 2 and "no node node99 in the simulated machine" in refused.output
