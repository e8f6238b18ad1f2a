"""What a backfilling matrix policy's pass looks at (policy/matrix_policy.py, docs/policies.md): only the
queue's tail when nothing ended or moved, and never past the reservation depth; the schedules those
bounds leave are the unbounded pass's wherever the queue is no deeper than the depth."""

import copy

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.policy.matrix_policy import MatrixPolicy, matrix_policy
from gangsched.policy.matrix_settings import MatrixPolicyKind
from gangsched.policy.reservations import Reservations
from gangsched.sim.engine import simulate
from gangsched.sim.sim_job import SimJob
from tests.helpers.workloads import estimated, workloads

BACKFILLING = [MatrixPolicyKind.BGS, MatrixPolicyKind.MBGS]


class EveryJobEachPass(MatrixPolicy):
    """The pass as it was before either bound: it visits every queued job at every event."""

    def schedule(self, now):
        self._settled = 0
        return super().schedule(now)


class CountedReservations(Reservations):
    """Counts the reservations worked out."""

    made = 0

    def reserve(self, *args, **kwargs):
        CountedReservations.made += 1
        super().reserve(*args, **kwargs)


def policy(kind: MatrixPolicyKind, depth: int | None, kind_of: type[MatrixPolicy] = MatrixPolicy) -> MatrixPolicy:
    template = matrix_policy(kind, 8, mpl=3, migration_cost_s=1, migrate_per_slice=6, reservation_depth=depth)
    return kind_of(8, template.settings, template.name)


@settings(max_examples=150, deadline=None)
@given(workloads(last_submit=40), st.sampled_from(BACKFILLING))
def test_a_pass_that_skips_what_cannot_start_sooner_gives_the_same_schedule(rows, kind):
    bounded, every = estimated(rows), estimated(rows)
    simulate(bounded, policy(kind, 25))  # deeper than any of these queues (25 jobs at most)
    simulate(every, policy(kind, None, EveryJobEachPass))
    assert [(job.start, job.end) for job in bounded] == [(job.start, job.end) for job in every]


@settings(max_examples=100, deadline=None)
@given(workloads(last_submit=10), st.sampled_from(BACKFILLING), st.integers(1, 6))
def test_a_shallow_depth_starts_every_job_once_and_breaks_no_reservation(rows, kind, depth):
    jobs = estimated(rows)
    simulate(copy.deepcopy(jobs), policy(kind, None))  # the same workload runs unbounded too
    simulate(jobs, policy(kind, depth))
    for job in jobs:
        assert job.start is not None and job.end is not None and job.start >= job.submit


def test_jobs_past_the_depth_wait_untried_and_hold_no_reservation():
    bgs = matrix_policy(MatrixPolicyKind.BGS, 4, mpl=1, reservation_depth=3)
    bgs.submit(SimJob(1, 0, 100, 100, 4), 0)  # holds the machine until 100
    bgs.schedule(0)
    for job_id in range(2, 12):
        bgs.submit(SimJob(job_id, 1, 10, 10, 1), 1)
    bgs.schedule(1)
    assert set(bgs.reservations.held) == {2, 3, 4}  # the first three of the queue
    bgs.finish(bgs.matrix.placed[1].job, 50)
    started = bgs.schedule(50).rates
    # four processors free: the three reserved start, and the fourth job in line, now within the depth
    assert set(started) == {2, 3, 4, 5}
    assert set(bgs.reservations.held) == {6, 7, 8}


def test_an_event_works_out_no_more_reservations_than_the_depth_however_deep_the_queue():
    made = []
    for queued in (600, 6000):
        bgs = matrix_policy(MatrixPolicyKind.BGS, 16, mpl=2, reservation_depth=50)
        bgs.reservations = CountedReservations(bgs.matrix, bgs.topology)
        bgs.submit(SimJob(1, 0, 100, 100, 16), 0)
        bgs.submit(SimJob(2, 0, 200, 200, 16), 0)
        for job_id in range(3, queued + 3):
            bgs.submit(SimJob(job_id, 0, 10 + job_id % 7, 10 + job_id % 7, 1 + job_id % 4), 0)
        bgs.schedule(0)
        CountedReservations.made = 0
        bgs.finish(bgs.matrix.placed[1].job, 40)  # early: the room it leaves may move every reservation
        bgs.submit(SimJob(queued + 3, 40, 5, 5, 2), 40)
        bgs.schedule(40)
        made.append(CountedReservations.made)
    assert made[0] == made[1] and 0 < made[0] <= 50
