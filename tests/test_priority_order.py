"""Priority order in every policy that takes its queue in an order, use decayed over a half-life, and the
multifactor priority (policy/priority_order.py, policy/usage_decay.py, policy/multifactor.py,
sim/fair_share.py)."""

import copy

import pytest
from hypothesis import given, settings

from gangsched.policy.backfill import ConservativePolicy, EasyPolicy, FcfsPolicy
from gangsched.policy.catalog import Choice
from gangsched.policy.matrix_policy import matrix_policy
from gangsched.policy.matrix_settings import MatrixPolicyKind
from gangsched.policy.multifactor import Factors, PriorityError, PriorityWeights, factors
from gangsched.policy.priority_order import enqueue, reorder_jobs
from gangsched.policy.usage_decay import DecayedUsage
from gangsched.sim.engine import simulate
from gangsched.sim.fair_share import FairShareSettings, SimPriorities
from gangsched.sim.runner import run_keeping_jobs
from gangsched.sim.sim_job import SimJob
from tests.helpers.workloads import estimated, workloads


def job(job_id: int, procs: int, priority: float = 0.0, estimate: float = 10.0, user: str = "") -> SimJob:
    return SimJob(job_id, 0.0, estimate, estimate, procs, priority=priority, user=user)


def test_a_job_goes_after_every_job_of_its_priority_or_higher_and_a_reorder_is_stable() -> None:
    queue: list = []
    for each in (job(1, 1, 1.0), job(2, 1, 0.0), job(3, 1, 1.0), job(4, 1, 2.0), job(5, 1, 0.0)):
        enqueue(queue, each)
    assert [each.job_id for each in queue] == [4, 1, 3, 2, 5]
    assert not reorder_jobs(queue)
    queue[4].priority = 5.0
    assert reorder_jobs(queue) and [each.job_id for each in queue] == [5, 4, 1, 3, 2]


@pytest.mark.parametrize("policy", [FcfsPolicy(4), EasyPolicy(4), ConservativePolicy(4),
                                    matrix_policy(MatrixPolicyKind.GS, 4, mpl=1),
                                    matrix_policy(MatrixPolicyKind.BGS, 4, mpl=1)], ids=lambda p: p.name)
def test_the_highest_priority_waiting_job_starts_first(policy) -> None:
    """A full machine, two jobs of the whole machine waiting: the one raised above the other by a reorder
    starts when the machine frees, though it came later."""
    running, first, second = job(1, 4, estimate=10.0), job(2, 4, estimate=10.0), job(3, 4, estimate=10.0)
    policy.submit(running, 0.0)
    assert set(policy.schedule(0.0).rates) == {1}
    policy.submit(first, 1.0)
    policy.submit(second, 1.0)
    policy.schedule(1.0)
    second.priority = 1.0
    policy.reorder(2.0)
    policy.finish(running, 10.0)
    started = {job_id for job_id, rate in policy.schedule(10.0).rates.items() if rate > 0}
    if isinstance(policy, ConservativePolicy):  # reservations stay where arrival put them: 2 keeps its own
        assert started == {2}
    else:
        assert started == {3}


def test_easy_reserves_for_the_highest_priority_waiting_job() -> None:
    """3 of 4 processors busy until 10; a job of 4 (the head by priority) and a long job of 1: the long
    one would delay the head, so it waits, though it came first."""
    policy = EasyPolicy(4)
    policy.submit(job(1, 3, estimate=10.0), 0.0)
    policy.schedule(0.0)
    long_one, wide = job(2, 1, estimate=100.0), job(3, 4, priority=1.0, estimate=5.0)
    policy.submit(long_one, 1.0)
    policy.submit(wide, 1.0)
    assert policy.queue[0] is wide
    assert policy.schedule(1.0).rates == {}


WORKLOADS = workloads(last_submit=50)


@settings(max_examples=100, deadline=None)
@given(WORKLOADS)
def test_conservative_keeps_every_first_reservation_whatever_the_priorities(rows) -> None:
    jobs = estimated(rows)
    for index, each in enumerate(jobs):
        each.priority = float(index % 3)

    class Recording(ConservativePolicy):
        reserved: dict[int, float] = {}

        def submit(self, job, now: float) -> None:
            super().submit(job, now)
            self.reserved[job.job_id] = self.planned[job.job_id].start

    policy = Recording(8)
    policy.reserved = {}
    simulate(jobs, policy)
    assert all(each.start is not None and each.start <= policy.reserved[each.job_id] for each in jobs)


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative", "slack", "bgs", "mbgs", "gs-largeq"])
def test_with_every_weight_zero_the_schedule_is_arrival_orders(policy: str) -> None:
    """Priorities computed all along, every weight zero: each job starts and ends as without them."""
    jobs = estimated([(submit, procs, run, est) for submit, procs, run, est in
                      [(0, 3, 10, 10), (1, 4, 5, 5), (2, 1, 5, 5), (3, 1, 20, 20), (4, 2, 7, 9), (400, 8, 3, 3),
                       (401, 1, 600, 700), (402, 5, 30, 40)]])
    for index, each in enumerate(jobs):
        each.user = f"u{index % 3}"
    plain = [copy.copy(each) for each in jobs]
    zero = FairShareSettings(PriorityWeights(), period_s=1.0)
    run_keeping_jobs(Choice(policy), plain, 8)
    run_keeping_jobs(Choice(policy), jobs, 8, fair_share=zero)
    assert [(each.start, each.end) for each in jobs] == [(each.start, each.end) for each in plain]


def test_fair_share_puts_the_user_who_used_less_first() -> None:
    """u1 ran the whole machine for 100 s; then a job of each user waits: u2's starts first."""
    jobs = [SimJob(1, 0.0, 100.0, 100.0, 4, user="u1"), SimJob(2, 50.0, 10.0, 10.0, 4, user="u1"),
            SimJob(3, 60.0, 10.0, 10.0, 4, user="u2")]
    settings_ = FairShareSettings(PriorityWeights(fair_share=1000.0), period_s=1.0)
    simulate(jobs, FcfsPolicy(4), priorities=SimPriorities(jobs, settings_, 4))
    assert jobs[2].start == 100.0 and jobs[1].start == 110.0


def test_use_halves_over_each_half_life_and_is_forgotten_at_a_reset() -> None:
    usage: DecayedUsage[str] = DecayedUsage(half_life_s=10.0)
    usage.charge("a", 8.0, 0.0)
    usage.charge("b", 1.0, 10.0)
    assert usage.at(20.0) == pytest.approx({"a": 2.0, "b": 0.5})
    assert usage.at(10.0 * 600)["a"] == pytest.approx(8.0 * 2.0 ** -600)  # past the rescale, still exact
    weekly: DecayedUsage[str] = DecayedUsage(half_life_s=1e9, reset_every_s=100.0)
    weekly.charge("a", 5.0, 50.0)
    assert weekly.at(99.0)["a"] == pytest.approx(5.0) and weekly.at(100.0) == {}
    for half_life in (0.0, -1.0, float("inf")):
        with pytest.raises(ValueError, match="a half-life must be above 0 s and finite"):
            DecayedUsage(half_life_s=half_life)


def test_the_factors_and_their_weights() -> None:
    weights = PriorityWeights(age=100.0, fair_share=1000.0, job_size=10.0, max_age_s=100.0)
    pending = [SimJob(1, 0.0, 1.0, 1.0, 2, user="u", account="root", nice=5),
               SimJob(2, 150.0, 1.0, 1.0, 8, user="v", account="root")]
    got = factors(pending, 200.0, weights, 8, {("u", "root"): 0.5})
    assert got[1] == Factors(age=1.0, fair_share=0.5, job_size=0.25, partition=1.0, nice=5)
    assert got[2] == Factors(age=0.5, fair_share=0.0, job_size=1.0, partition=1.0, nice=0)
    assert got[1].priority(weights) == pytest.approx(100 + 500 + 2.5 - 5)
    small = factors(pending, 200.0, PriorityWeights(favor_small=True), 8, {})
    assert (small[1].job_size, small[2].job_size) == (pytest.approx(6 / 7), 0.0)
    with pytest.raises(PriorityError, match="^priority weight 'age' must be 0 or above, got -1.0$"):
        PriorityWeights(age=-1.0)
    with pytest.raises(PriorityError, match="maximum age must be above 0 s"):
        PriorityWeights(max_age_s=0.0)
