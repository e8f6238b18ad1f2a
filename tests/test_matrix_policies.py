"""The matrix policies of docs/policies.md: hand-checked matrices and invariants over random workloads."""

import copy
import dataclasses

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.policy.large_jobs import LargeJobs
from gangsched.policy.matrix_policy import MatrixPolicy, matrix_policy
from gangsched.policy.matrix_settings import MatrixPolicyKind, MatrixSettings
from gangsched.sim.engine import simulate
from gangsched.sim.sim_job import SimJob
from tests.helpers.workloads import estimated, workloads


def table(policy: MatrixPolicy) -> list[list[int | None]]:
    """The matrix as job ids per row and column."""
    rows = []
    for row in policy.matrix.rows:
        cells = {**row.homes, **row.copies}
        rows.append([next((job_id for job_id, placed in cells.items() if placed.columns >> column & 1), None)
                     for column in range(policy.matrix.width)])
    return rows


def submit_all(policy: MatrixPolicy, widths: list[int], estimate: float = 100) -> dict[int, float]:
    for job_id, width in enumerate(widths, 1):
        policy.submit(SimJob(job_id, 0, estimate, estimate, width), 0)
    return policy.schedule(0).rates


def test_zhang_2000_fig_7_eight_processors_at_mpl_4():
    """Two 8-way jobs, then 4, 2, 2, 4: J4 and J5 fill the fourth row too, and run twice as fast."""
    policy = matrix_policy(MatrixPolicyKind.GS, 8, mpl=4)
    rates = submit_all(policy, [8, 8, 4, 2, 2, 4])
    assert table(policy) == [
        [1, 1, 1, 1, 1, 1, 1, 1],
        [2, 2, 2, 2, 2, 2, 2, 2],
        [3, 3, 3, 3, 4, 4, 5, 5],
        [6, 6, 6, 6, 4, 4, 5, 5],
    ]
    assert rates == {1: 0.25, 2: 0.25, 3: 0.25, 4: 0.5, 5: 0.5, 6: 0.25}


def test_fillmatrix_copies_never_keep_a_later_arrival_out():
    """Zhang et al. 2000, §5.1: copies are cleaned at the next event, so an arrival takes their cells."""
    policy = matrix_policy(MatrixPolicyKind.GS, 8, mpl=4)
    submit_all(policy, [8, 8, 4, 2, 2, 4])  # Fig. 7: J4 and J5 copied into the fourth row
    policy.submit(SimJob(7, 1, 100, 100, 4), 1)
    rates = policy.schedule(1).rates
    assert table(policy)[3] == [6, 6, 6, 6, 7, 7, 7, 7]  # the best-fit row: the one the copies were in
    assert rates[4] == rates[5] == rates[7] == 0.25


def test_gs_adds_a_row_only_for_a_job_no_row_holds_and_only_up_to_the_mpl():
    """Best fit first (the row with the fewest free columns that holds the job), a new row next, then FCFS stops:
    a 1-column job behind an 8-column one waits though two cells stay free."""
    policy = matrix_policy(MatrixPolicyKind.GS, 8, mpl=2)
    submit_all(policy, [6, 2, 4])
    assert table(policy) == [[1, 1, 1, 1, 1, 1, 2, 2], [3, 3, 3, 3, None, None, 2, 2]]  # job 2 copied
    for job_id, width in ((4, 8), (5, 1)):
        policy.submit(SimJob(job_id, 1, 100, 100, width), 1)
    policy.schedule(1)
    assert [job.job_id for job in policy.queue] == [4, 5]
    assert len(policy.matrix.rows) == 2


def test_context_switches_cost_a_share_only_when_rows_alternate():
    policy = matrix_policy(MatrixPolicyKind.GS, 4, mpl=2, context_switch=0.05)
    assert submit_all(policy, [4]) == {1: 1.0}
    policy.submit(SimJob(2, 0, 10, 10, 4), 0)
    assert policy.schedule(0).rates == {1: 0.475, 2: 0.475}


def test_gs_stops_at_the_first_job_that_does_not_fit_and_bgs_backfills_past_it():
    widths = [4, 4, 4, 1]  # MPL 2 on 4 columns: the third job waits, the fourth could run beside nobody
    gs = matrix_policy(MatrixPolicyKind.GS, 4, mpl=2)
    submit_all(gs, widths)
    assert [job.job_id for job in gs.queue] == [3, 4]
    bgs = matrix_policy(MatrixPolicyKind.BGS, 4, mpl=2)
    submit_all(bgs, [4, 3, 4, 1])  # 4 fits beside job 2 and ends before job 3's reservation
    assert [job.job_id for job in bgs.queue] == [3]
    assert set(bgs.reservations.held) == {3}


def test_bgs_keeps_a_reservation_from_a_job_that_would_run_past_it():
    policy = matrix_policy(MatrixPolicyKind.BGS, 4, mpl=1)
    policy.submit(SimJob(1, 0, 10, 10, 2), 0)
    policy.submit(SimJob(2, 0, 10, 10, 4), 0)  # reserved at 10 in the only row
    policy.submit(SimJob(3, 0, 50, 50, 2), 0)  # fits beside job 1, but would hold columns past 10
    policy.submit(SimJob(4, 0, 5, 5, 2), 0)  # fits and ends by 10
    assert set(policy.schedule(0).rates) == {1, 4}
    assert policy.reservations.held[2].start == 10


def test_migration_moves_a_job_to_other_columns_to_empty_a_row():
    """Row 1 holds a 1-column job where row 0's job sits; with migration it joins row 0 beside it."""
    settings = MatrixSettings(mpl=2, migration=True, migration_cost_s=10)
    policy = MatrixPolicy(4, settings, name="mgs")
    policy.submit(SimJob(1, 0, 100, 100, 2), 0)
    policy.submit(SimJob(2, 0, 100, 100, 2), 0)
    policy.schedule(0)  # row 0: 1 on columns 0-1, 2 on columns 2-3
    policy.submit(SimJob(3, 1, 100, 100, 1), 1)
    policy.schedule(1)  # row 0 is full: 3 opens row 1 on column 0
    policy.finish(SimJob(2, 0, 100, 100, 2), 2)
    decision = policy.schedule(2)  # option 2 (C·1 + C/2·2 = 20) beats option 1 (C/2·1 + C·2 = 25)
    assert table(policy) == [[1, 1, 3, None]]
    assert policy.stats.migrations == 1
    assert decision.extra_work == {3: 10, 1: 5}
    assert decision.rates == {1: 1.0, 3: 1.0}


def test_mbgs_migrates_like_mgs_when_no_reservation_stands_in_the_way():
    """As above, with backfilling: job 3 may join row 0 only because nothing is reserved there."""
    policy = matrix_policy(MatrixPolicyKind.MBGS, 4, mpl=2, migration_cost_s=10)
    policy.submit(SimJob(1, 0, 100, 100, 2), 0)
    policy.submit(SimJob(2, 0, 100, 100, 2), 0)
    policy.schedule(0)
    policy.submit(SimJob(3, 1, 100, 100, 1), 1)
    policy.schedule(1)
    policy.finish(SimJob(2, 0, 100, 100, 2), 2)
    decision = policy.schedule(2)
    assert table(policy) == [[1, 1, 3, None]] and decision.extra_work == {3: 10, 1: 5}


def test_the_large_job_queue_lets_at_most_j_max_large_jobs_share_a_processor():
    large = LargeJobs(threshold_s=50, most_sharing=1)
    policy = matrix_policy(MatrixPolicyKind.GS_LARGE_QUEUE, 4, large=large)
    policy.submit(SimJob(1, 0, 100, 100, 4), 0)  # large
    policy.submit(SimJob(2, 0, 100, 100, 2), 0)  # large: must wait for 1
    policy.submit(SimJob(3, 0, 10, 10, 4), 0)  # small: a new row at once
    assert set(policy.schedule(0).rates) == {1, 3}
    assert [job.job_id for job in policy.large_queue] == [2]


KINDS = list(MatrixPolicyKind)


class Checked(MatrixPolicy):
    """A matrix policy that checks the matrix's invariants after every scheduling event."""

    def schedule(self, now):
        decision = super().schedule(now)
        matrix, seen = self.matrix, set()
        for row in matrix.rows:
            union = 0
            for placed in [*row.homes.values(), *row.copies.values()]:
                assert not union & placed.columns, "two tasks in one cell"
                union |= placed.columns
            assert union == row.occupied
            assert min(row.profile.free, default=0) >= 0, "a reservation was broken"
            seen.update(row.homes)
        assert seen == set(matrix.placed), "a running job without a home row"
        if self.settings.mpl is not None:
            assert len(matrix.rows) <= self.settings.mpl
        large = self.settings.large
        if large is not None:
            one_more = dataclasses.replace(large, most_sharing=large.most_sharing + 1)
            assert one_more.saturated(matrix) == 0, "more than j_max large jobs share a processor"
        return decision


WORKLOADS = workloads(last_submit=40)


def checked(kind: MatrixPolicyKind, mpl: int) -> Checked:
    template = matrix_policy(kind, 8, mpl=mpl, context_switch=0.02, migration_cost_s=1, migrate_per_slice=6,
                             large=LargeJobs(threshold_s=15, most_sharing=2, backfill=kind == "gs-largeq"))
    return Checked(8, template.settings, template.name)


@settings(max_examples=150, deadline=None)
@given(WORKLOADS, st.sampled_from(KINDS), st.integers(1, 4))
def test_matrix_invariants_hold_and_every_job_finishes_once(rows, kind, mpl):
    jobs = estimated(rows)
    simulate(jobs, checked(kind, mpl))
    for job in jobs:
        assert job.start is not None and job.end is not None and job.start >= job.submit
        assert job.end - job.start >= job.run_time - 1e-6  # nobody runs faster than on its own


@settings(max_examples=50, deadline=None)
@given(WORKLOADS, st.sampled_from(KINDS))
def test_a_workload_gives_one_schedule(rows, kind):
    jobs = estimated(rows)
    first, second = copy.deepcopy(jobs), copy.deepcopy(jobs)
    simulate(first, checked(kind, 3))
    simulate(second, checked(kind, 3))
    assert [(job.start, job.end) for job in first] == [(job.start, job.end) for job in second]
