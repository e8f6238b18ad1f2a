"""`gang bench switch`'s overhead: the job CPU lost against the tasks run unscheduled."""

import pytest

from gangsched.bench.switch import SwitchResult


def scheduled(job_cpu_rate: float) -> SwitchResult:
    return SwitchResult(switches=1000, partitions=1, median_ms=0.7, p99_ms=1.0, cpu=0.6, job_cpu_rate=job_cpu_rate)


def test_the_overhead_is_the_share_of_the_unscheduled_rate_lost():
    assert scheduled(1.97).against([2.0, 2.0]).overhead_pct == pytest.approx(1.5)


def test_a_baseline_segment_that_other_work_took_a_share_of_does_not_move_the_overhead():
    quiet = [1.994, 1.993, 1.995, 1.994, 1.994, 1.993, 1.995]
    disturbed = scheduled(1.972).against([*quiet, 1.90]).overhead_pct
    assert disturbed == pytest.approx(scheduled(1.972).against(quiet).overhead_pct, abs=0.01)
