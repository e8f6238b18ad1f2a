"""`gang sim`, `gang sim sweep` and the simulated experiments, run as a user runs them."""

import csv
from pathlib import Path

import pytest
from click.testing import CliRunner

from gangsched.cli.group import cli
from gangsched.workload.swf import modelled_job, read_swf, write_swf


def gang(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), catch_exceptions=False)
    return result.exit_code, result.output


def small_trace(path: Path) -> Path:
    jobs = [modelled_job(i, 10.0 * i, 30.0 + i % 7 * 20, 1 + i % 8) for i in range(1, 121)]
    jobs.append(modelled_job(200, 1300.0, 50.0, 64))  # wider than the machine: dropped and counted
    write_swf(path, jobs, ["; MaxProcs: 16"])
    return path


def test_a_trace_gives_metrics_a_per_job_csv_and_the_schedule_as_swf(tmp_path):
    trace = small_trace(tmp_path / "small.swf")
    code, output = gang("sim", str(trace), "--policy", "bgs", "--mpl", "3",
                        "--csv", str(tmp_path / "jobs.csv"), "--swf-out", str(tmp_path / "out.swf.gz"))
    assert code == 0, output
    assert "bgs-3, 16 procs: 120 jobs" in output and "dropped: wider than the machine" in output
    with open(tmp_path / "jobs.csv") as file:
        rows = list(csv.DictReader(file))
    assert len(rows) == 120 and list(rows[0]) == ["job_id", "submit", "start", "end", "wait", "procs",
                                                  "run_time", "estimate"]
    assert all(float(row["start"]) >= float(row["submit"]) for row in rows)
    scheduled = read_swf(tmp_path / "out.swf.gz")
    assert len(scheduled.jobs) == 120 and all(job.wait >= 0 for job in scheduled.jobs)


def test_every_policy_runs_a_model_workload():
    for policy in ("fcfs", "easy", "conservative", "slack", "gs", "bgs", "mgs", "mbgs", "gs-largeq"):
        code, output = gang("sim", "run", "--model", "downey", "--jobs", "150", "--procs", "32",
                            "--policy", policy, "--q", "8", "--migration-cost", "5", "--cs", "0.02")
        assert code == 0 and " 0 unfinished" in output, (policy, output)


@pytest.mark.live
def test_a_sweep_writes_one_point_per_policy_and_load(tmp_path):
    code, output = gang("sim", "sweep", "--model", "lublin", "--jobs", "200", "--procs", "32",
                        "--policy", "easy,gs", "--loads", "0.5,0.8", "--workers", "2", "--out", str(tmp_path))
    assert code == 0, output
    with open(tmp_path / "sweep.csv") as file:
        rows = list(csv.DictReader(file))
    assert [(row["policy"], row["load"]) for row in rows] == [
        ("easy", "0.5"), ("easy", "0.8"), ("gs-5", "0.5"), ("gs-5", "0.8")]
    assert (tmp_path / "sweep.png").stat().st_size > 0


def test_the_shipped_kth_log_runs_by_its_name():
    code, output = gang("sim", "KTH-SP2-1996-2.1-cln", "--policy", "easy")
    assert code == 0, output
    assert "easy, 100 procs: 28475 jobs" in output and "475  ran past its estimate" in output
    code, output = gang("sim", "no-such-log")
    assert code == 2 and "not a file nor a log shipped with gangsched (KTH-SP2-1996-2.1-cln, " in output


def test_a_machine_with_memory_counts_the_logs_requests():
    # the LANL CM-5 sample asks up to 32 MB per processor (field 10); nodes of 16 MB cannot hold all
    code, output = gang("sim", "LANL-CM5-1994-4.1-cln-first100", "--policy", "gs", "--memory-per-node", "16M")
    assert code == 0, output
    assert "dropped: more memory than a node has" in output
    code, output = gang("sim", "LANL-CM5-1994-4.1-cln-first100", "--policy", "gs", "--memory-per-node", "12Q")
    assert code == 2 and "'12Q' is not a size" in output


def test_bad_input_is_one_clear_line(tmp_path):
    broken = tmp_path / "broken.swf"
    broken.write_text("1 2 3\n")
    code, output = gang("sim", str(broken), "--procs", "8")
    assert code == 1 and "cannot read" in output and "3 fields" in output
    code, output = gang("sim", "sweep", "--model", "lublin", "--policy", "easy,nope")
    assert code == 2 and "unknown policy nope" in output


@pytest.mark.live
def test_an_experiment_writes_its_table_csv_and_plot(tmp_path):
    code, output = gang("experiment", "S3", "--jobs", "200", "--out", str(tmp_path))
    assert code == 0, output
    report = (tmp_path / "s3.md").read_text()
    assert "MBGS ≤ BGS in" in report and "(1,693.3)" in report  # the paper's figure beside ours
    assert "| large | " in report and " ± " in report  # the workload beside the paper's, an interval per cell
    assert (tmp_path / "s3.csv").exists() and (tmp_path / "s3.png").stat().st_size > 0


def test_a_hyper_erlang_workload_comes_from_the_classes_given(tmp_path):
    erlang = {"order": 2, "p": 0.5, "rate1": 0.02, "rate2": 0.002}
    params = tmp_path / "classes.json"
    params.write_text(f'[{{"max_size": 4, "arrivals": {erlang}, "service": {erlang}}}]'.replace("'", '"'))
    code, output = gang("sim", "--model", "hyper-erlang", "--model-params", str(params), "--jobs", "300",
                        "--procs", "8", "--policy", "easy")
    assert code == 0 and "300 jobs" in output, output
    params.write_text('[{"max_size": 4}]')
    code, output = gang("sim", "--model", "hyper-erlang", "--model-params", str(params), "--procs", "8")
    assert code == 1 and "arrivals: Field required" in output
