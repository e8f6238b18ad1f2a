"""Workloads: SWF against the real traces and bad input, and the Lublin model's shape."""

import collections
import math
import statistics

import pytest

from gangsched.traces import KTH_SP2 as KTH
from gangsched.workload.downey import DowneyParameters, downey_jobs
from gangsched.workload.estimates import beta_estimates
from gangsched.workload.hyper_erlang import HyperErlang, HyperErlangClass, hyper_erlang_jobs
from gangsched.workload.lublin import gamma_cdf, lublin_jobs
from gangsched.workload.scaling import at_load, offered_load, scale_run_times
from gangsched.workload.swf import SwfError, SwfJob, parse_swf, read_swf, write_swf

BASE = SwfJob(job_id=1, submit=10, wait=-1, run_time=100.5, procs=4, avg_cpu=-1, memory=-1,
              req_procs=4, req_time=200, req_memory=-1, status=1, user=3, group=1, executable=-1,
              queue=1, partition=-1, preceding_job=-1, think_time=-1)


def job(job_id: int, **changes: float) -> SwfJob:
    return BASE._replace(job_id=job_id, submit=10.0 * job_id, **changes)


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


def test_decimals_read_where_swf_allows_them_and_every_field_has_its_type():
    whole = parse_swf(["1 0 5 10 4 -1 -1 4 100 -1 1 3 1 -1 1 -1 -1 -1"]).jobs[0]
    decimal = parse_swf(["1 0 5 10.5 4 12.25 -1 4 100 -1 1 3 1 -1 1 -1 -1 -1"]).jobs[0]
    assert decimal == whole._replace(run_time=10.5, avg_cpu=12.25)
    types = [int, float, float, float, int, float, float, int, float, float, int, int, int, int, int, int, int, float]
    for record in (whole, decimal):  # a line of whole numbers only is read another way
        assert [type(value) for value in record] == types


def test_the_shipped_kth_log_reads_as_its_readme_describes():
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


def test_the_beta_model_keeps_a_fraction_beta_exact_and_only_overestimates():
    jobs = lublin_jobs(4000, 64, seed=2)
    estimated = beta_estimates(jobs, beta=0.4, seed=5)
    exact = sum(e.req_time == round(j.run_time, 2) for j, e in zip(jobs, estimated))
    assert 0.36 < exact / len(jobs) < 0.44
    assert all(e.req_time >= round(j.run_time, 2) for j, e in zip(jobs, estimated))
    assert all(e.req_time == round(e.run_time, 2) for e in beta_estimates(jobs, 1.0, seed=5))
    with pytest.raises(ValueError):
        beta_estimates(jobs, 1.5, seed=5)


def test_scaling_arrivals_sets_the_offered_load():
    jobs = lublin_jobs(3000, 128, seed=4)
    scaled = at_load(jobs, 128, 0.7)
    assert offered_load(scaled, 128) == pytest.approx(0.7, rel=0.01)
    assert [j.run_time for j in scaled] == [j.run_time for j in jobs]
    doubled = scale_run_times(jobs, 1.8)
    assert offered_load(doubled, 128) == pytest.approx(1.8 * offered_load(jobs, 128))


def test_the_downey_model_is_log_uniform_in_whole_slots_at_the_load_asked():
    jobs = downey_jobs(5000, load=0.6, seed=3, p=DowneyParameters(procs=128))
    sizes = [j.procs for j in jobs]
    assert min(sizes) == 1 and max(sizes) == 128
    assert 0.2 < sum(s <= 11 for s in sizes) / len(sizes) < 0.6  # half the log range: 1..~11
    assert all(j.run_time == int(j.run_time) and 1 <= j.run_time <= 240 for j in jobs)
    assert offered_load(jobs, 128) == pytest.approx(0.6, rel=0.1)


def test_the_hyper_erlang_model_draws_each_class_with_its_own_means():
    small = HyperErlangClass(1, HyperErlang(2, 0.5, 1 / 10, 1 / 50), HyperErlang(1, 1.0, 1 / 100, 1.0))
    large = HyperErlangClass(64, HyperErlang(2, 0.5, 1 / 100, 1 / 500), HyperErlang(1, 1.0, 1 / 5000, 1.0))
    jobs = hyper_erlang_jobs(6000, [small, large], seed=9)
    serial = [j for j in jobs if j.procs == 1]
    wide = [j for j in jobs if j.procs > 1]
    assert all(33 <= j.procs <= 64 for j in wide)
    assert len(serial) / len(wide) == pytest.approx(10, rel=0.15)  # arrival means 30 s vs 300 s
    assert statistics.mean(j.run_time for j in serial) == pytest.approx(100, rel=0.1)
    assert statistics.mean(j.run_time for j in wide) == pytest.approx(5000, rel=0.15)
    assert [j.submit for j in jobs] == sorted(j.submit for j in jobs)


def test_the_calibrated_model_has_the_baseline_zhang_et_al_2000_describe():
    """30 % of jobs above 32 nodes doing over 80 % of the work, sizes 1-256, load 0.55 on 320 nodes, a median
    run time of 680 s once run times are scaled by 1.5 (their workload 5), over-dispersive times."""
    from gangsched.workload.characteristics import characterize
    from gangsched.workload.zhang2000 import MACHINE_NODES, coefficient_of_variation, zhang2000_classes, zhang2000_jobs

    for seed in (1, 2):
        stats = characterize(zhang2000_jobs(10_000, seed), MACHINE_NODES)
        assert stats.smallest == 1 and stats.largest == 256
        assert 0.28 <= stats.large_share <= 0.32
        assert stats.large_work_share > 0.8
        assert 0.50 <= stats.offered_load <= 0.60
        assert 680 / 1.5 * 0.95 <= stats.median_run_s <= 680 / 1.5 * 1.05
    for size_class in zhang2000_classes():
        assert coefficient_of_variation(size_class.service) == pytest.approx(2.0)
        assert coefficient_of_variation(size_class.arrivals) == pytest.approx(2.0)
