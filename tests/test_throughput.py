"""`gang bench throughput` on a small flood: every job is counted once it is written COMPLETED, and
each figure is there (the rates themselves are the benchmark's to print, not a test's to judge)."""

import pytest

from gangsched.bench.throughput import measure_throughput, plot
from gangsched.deploy.config import ClusterConfig

pytestmark = pytest.mark.live


# the web view (`--web`) reading the master as the jobs flow, as on a cluster `gang cluster up` starts;
# the jobs' output where the bench is told (`--output`), else in the nodes' spools
@pytest.mark.parametrize(("arrays", "clients", "http_bind", "own_output"),
                         [(2, None, "", False), (None, 3, "", True), (2, None, "127.0.0.1:0", False)])
def test_a_small_flood_is_counted_to_its_last_job_written(tmp_path, arrays, clients, http_bind, own_output):
    config = ClusterConfig(nodes=2, processors_per_node=2, quantum_ms=100, http_bind=http_bind)
    output = str(tmp_path / "outputs" / "job-%j.%t.out") if own_output else None
    if output:
        (tmp_path / "outputs").mkdir()
    run = measure_throughput(config, 20, arrays, clients, ["/bin/true"], floor_s=0.3, output=output)
    if output:
        assert len(list((tmp_path / "outputs").glob("job-*.0.out"))) == 20
    assert run.row()["output"] == (output or "the node's spool")
    assert run.output_file_us is not None and run.output_file_us > 0  # the file system's cost after the flood
    assert run.jobs == 20 and run.seconds > 0 and run.jobs_per_s == pytest.approx(20 / run.seconds)
    assert run.samples[-1]["completed"] == 20 and run.samples[-1]["pending"] == 0
    assert run.launched_to_ended_ms >= 0 and run.queued_to_launched_ms >= 0
    assert run.floor_spawn_per_s and run.floor_commits_per_s
    assert run.switch_flood_p50_ms > 0 and run.switch_idle_p50_ms > 0
    # where the jobs' CPU went: the node daemons' and their tasks' beside the master's
    assert run.nodes is not None and min(run.nodes.user_s, run.nodes.system_s, run.nodes.tasks_s) >= 0
    assert run.nodes.user_s + run.nodes.system_s > 0 and run.row()["nodes_user_ms_per_job"] is not None
    plot(run, tmp_path / "drain.png")
    assert (tmp_path / "drain.png").stat().st_size > 0


def test_a_flood_on_emulated_nodes_counts_tasks_that_end_as_they_run():
    config = ClusterConfig(nodes=1, processors_per_node=1, quantum_ms=100, http_bind="")
    run = measure_throughput(config, 30, 3, None, ["/bin/true"], emulated_nodes=6)
    assert run.samples[-1]["completed"] == 30 and run.samples[-1]["pending"] == 0
    assert run.floor_spawn_per_s is None and run.row()["of spawn floor"] is None  # no process, no floor
    assert run.nodes is None and run.row()["tasks_ms_per_job"] is None
    assert run.output_file_us is None  # no output made on this machine's file system
    assert run.switch_flood_p50_ms > 0
