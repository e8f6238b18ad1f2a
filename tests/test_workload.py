"""Workloads: SWF against the real traces and bad input, and the Lublin model's shape."""

import collections
import dataclasses
import math
from pathlib import Path

import pytest

from gangsched.workload.lublin import gamma_cdf, lublin_jobs
from gangsched.workload.swf import SwfError, SwfJob, parse_swf, read_swf, write_swf

TRACES = Path(__file__).resolve().parents[2] / "shared" / "traces"
KTH = TRACES / "KTH-SP2-1996-2.1-cln.swf.gz"


BASE = SwfJob(job_id=1, submit=10, wait=-1, run_time=100.5, procs=4, avg_cpu=-1, memory=-1,
              req_procs=4, req_time=200, req_memory=-1, status=1, user=3, group=1, executable=-1,
              queue=1, partition=-1, preceding_job=-1, think_time=-1)


def job(job_id: int, **changes: float) -> SwfJob:
    return dataclasses.replace(BASE, job_id=job_id, submit=10.0 * job_id, **changes)


@pytest.mark.parametrize("name", ["trace.swf", "trace.swf.gz"])
def test_a_written_trace_reads_back_the_same(tmp_path, name):
    jobs = [job(1), job(2, procs=128, run_time=0)]
    write_swf(tmp_path / name, jobs, ["; MaxProcs: 128", "Note: made by a test"])
    trace = read_swf(tmp_path / name)
    assert trace.jobs == jobs
    assert trace.max_procs() == 128 and trace.header["Note"] == "made by a test"


@pytest.mark.parametrize("line, what", [("1 2 3", "3 fields"), (" ".join(["1.5"] * 18), "whole number")])
def test_a_bad_line_is_an_error_with_its_line_number(line, what):
    with pytest.raises(SwfError, match=f"t.swf:2: .*{what}"):
        parse_swf(["; MaxProcs: 4", line], "t.swf")


@pytest.mark.skipif(not KTH.exists(), reason="the shared traces are not beside this checkout")
def test_the_kth_trace_reads_as_its_readme_describes():
    trace = read_swf(KTH)
    assert len(trace.jobs) == 28_476 and trace.max_procs() == 100
    assert trace.jobs[0].submit == 599_850
    assert sum(j.run_time == 0 for j in trace.jobs) == 8
    assert [j.job_id for j in trace.jobs if j.procs == -1] == [27313]


def test_lublin_jobs_are_the_same_for_the_same_seed_and_differ_for_another():
    assert lublin_jobs(200, 64, seed=7) == lublin_jobs(200, 64, seed=7)
    assert lublin_jobs(200, 64, seed=7) != lublin_jobs(200, 64, seed=8)


def test_lublin_jobs_have_the_models_shape():
    jobs = lublin_jobs(5000, 128, seed=3)
    sizes = [j.procs for j in jobs]
    assert 1 <= min(sizes) and max(sizes) <= 128
    assert 0.22 < sizes.count(1) / len(sizes) < 0.27  # 0.244 serial
    assert all(0 < j.run_time <= math.exp(12) for j in jobs if j.run_time)
    submits = [j.submit for j in jobs]
    assert submits == sorted(submits)
    by_hour = collections.Counter(int(s % 86400 // 3600) for s in submits)
    assert sum(by_hour[h] for h in range(13, 17)) > 3 * sum(by_hour[h] for h in range(3, 7))  # daily cycle


def test_sizes_stay_within_a_machine_that_is_no_power_of_two():
    assert max(j.procs for j in lublin_jobs(2000, 100, seed=1)) <= 100


def test_gamma_cdf_matches_known_values():
    assert gamma_cdf(1.0, 1.0, 1.0) == pytest.approx(1 - math.exp(-1))  # exponential
    assert gamma_cdf(2.0, 2.0, 1.0) == pytest.approx(1 - 3 * math.exp(-2))  # Erlang-2
    assert gamma_cdf(0.0, 3.0, 2.0) == 0.0 and gamma_cdf(1e6, 3.0, 2.0) == pytest.approx(1.0)
