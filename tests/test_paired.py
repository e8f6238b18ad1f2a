"""Paired gang scheduling as pure code: predictor, pairing, matching, homogeneity, alternates."""

import pytest

from gangsched.policy.columns import Layout
from gangsched.policy.matrix_policy import matrix_policy
from gangsched.policy.matrix_settings import MatrixPolicyKind
from gangsched.policy.paired import alternates, best_fit_partner, fair_matching, pairable, row_utilizations
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.policy.quantum import PairedPlanner, PlanInput, StrictPlanner
from gangsched.sim.sim_job import SimJob

ALL = 0b1111  # four nodes


def predictor_after(*measured: float, sharp_change: float | None = 20.0) -> UtilizationPredictor:
    predictor = UtilizationPredictor(sharp_change)
    for utilization in measured:
        predictor.observe(utilization)
    return predictor


def test_a_new_job_is_predicted_to_use_the_whole_cpu():
    assert UtilizationPredictor().predict() == 100.0


def test_the_prediction_weights_the_last_four_quanta():
    assert predictor_after(10, 12, 14, 16, 18).predict() == pytest.approx(
        0.4 * 18 + 0.3 * 16 + 0.2 * 14 + 0.1 * 12)


def test_fewer_measured_quanta_renormalize_the_weights():
    assert predictor_after(10, 20).predict() == pytest.approx((0.4 * 20 + 0.3 * 10) / 0.7)


def test_a_sharp_increase_runs_the_job_alone_for_one_quantum():
    predictor = predictor_after(5, 6, 5, 90)
    assert predictor.predict() == 100.0
    predictor.observe(88)
    assert predictor.predict() == pytest.approx((0.4 * 88 + 0.3 * 90) / 0.7)  # the old phase is gone


def test_a_sharp_decrease_is_followed_at_once_without_running_alone():
    assert predictor_after(90, 92, 91, 8).predict() == pytest.approx(8)


def test_without_detection_the_history_lags_the_phase_change():
    assert predictor_after(5, 5, 5, 90, sharp_change=None).predict() == pytest.approx(
        0.4 * 90 + 0.6 * 5)


def test_two_rows_pair_only_below_a_hundred_percent_with_the_margin():
    assert pairable(80, 18) and not pairable(80, 19) and not pairable(81, 18.5)


def test_the_papers_case_80_and_81_percent_jobs_among_many_5_percent_ones():
    # rows: 80 %, 81 % and five 5 % rows; neither heavy row may pair with the other
    utilizations = [80, 81, 5, 5, 5, 5, 5]
    partners = fair_matching(utilizations, exclusive_rows=())
    assert partners[1] in range(2, 7) and partners[0] in range(2, 7)
    assert partners.get(0) != 1
    assert all(pairable(utilizations[r], utilizations[p]) for r, p in partners.items())
    assert set(partners) == set(range(7))  # every row gets a partner


def test_fair_matching_pairs_low_with_high_and_lends_a_partner_to_the_leftover():
    partners = fair_matching([10, 20, 85, 95, 30], exclusive_rows=())
    # sorted: 10, 20, 30, 85, 95 -> (10, 95)? 10+95 > 99: 95 fits nobody; (10, 85); (20, 30)
    assert partners[0] == 2 and partners[2] == 0 and partners[1] == 4 and partners[4] == 1
    assert 3 not in partners  # 95 % pairs with nothing


def test_best_fit_takes_the_hungriest_pairable_row_ties_to_the_last():
    assert best_fit_partner(0, [10, 50, 70, 70, 95], exclusive_rows=()) == 3
    assert best_fit_partner(4, [10, 50, 70, 70, 95], exclusive_rows=()) is None
    # like jobs measured a fraction of a point apart are a tie: the last one scanned wins
    assert best_fit_partner(0, [5.0, 5.6, 5.2, 4.7], exclusive_rows=()) == 3
    assert best_fit_partner(0, [5.0, 7.0, 5.2, 4.7], exclusive_rows=()) == 1


def test_exclusive_rows_are_never_paired():
    assert fair_matching([5, 5, 5], exclusive_rows={1}).get(1) is None
    assert 1 not in fair_matching([5, 5, 5], exclusive_rows={1}).values()
    assert best_fit_partner(0, [5, 5], exclusive_rows={1}) is None


def gs_of(*widths: int):  # type: ignore[no-untyped-def]
    policy = matrix_policy(MatrixPolicyKind.GS, 4, mpl=8)
    for job, width in enumerate(widths, start=1):
        policy.submit(SimJob(job, 0.0, 10.0, 10.0, width), 0.0)
    policy.schedule(0.0)
    return policy


def plan(layout: Layout, predictions: dict[int, float], exclusive: frozenset[int] = frozenset()) -> PlanInput:
    return PlanInput(layout, lambda: predictions, exclusive, ALL, regroup=lambda _: layout)


def test_slot_homogeneity_moves_a_job_out_of_a_band_it_breaks():
    policy = gs_of(2, 2)  # jobs 1 and 2 share row 0
    assert policy.layout() == [{1: 0b0011, 2: 0b1100}]
    policy.homogenize({1: 5.0, 2: 90.0}, now=1.0)
    assert policy.layout() == [{1: 0b0011}, {2: 0b1100}]
    policy.homogenize({1: 5.0, 2: 90.0}, now=2.0)
    assert policy.layout() == [{1: 0b0011}, {2: 0b1100}]  # stable


def test_alternates_fill_idle_nodes_within_the_running_rows_band():
    layout = [{1: 0b0011}, {2: 0b1111}, {3: 0b1100}]
    assert alternates(layout, (0,), ALL, {1: 50, 2: 50, 3: 55}, exclusive_jobs=()) == [3]
    assert alternates(layout, (0,), ALL, {1: 50, 2: 50, 3: 90}, exclusive_jobs=()) == []
    assert alternates(layout, (0, 1), ALL, {1: 50, 2: 5, 3: 55}, exclusive_jobs=()) == []


def test_the_paired_planner_runs_each_row_with_its_partner_in_turn():
    layout = gs_of(4, 4, 4).layout()
    predictions = {1: 90.0, 2: 5.0, 3: 95.0}
    planner = PairedPlanner("fair")
    chosen = [planner.select(plan(layout, predictions)).rows for _ in range(6)]
    assert chosen == [(0, 1), (1, 0), (2,), (0, 1), (1, 0), (2,)]
    assert row_utilizations(layout, predictions) == [90.0, 5.0, 95.0]


def test_the_paired_planner_never_pairs_an_exclusive_job():
    layout = gs_of(4, 4).layout()
    planner = PairedPlanner("fair")
    rows = [planner.select(plan(layout, {1: 5.0, 2: 5.0}, {1})).rows for _ in range(4)]
    assert rows == [(0,), (1,), (0,), (1,)]


def test_the_strict_planner_runs_one_row_at_a_time():
    layout = gs_of(4, 4).layout()
    planner = StrictPlanner()
    assert [planner.select(plan(layout, {})).rows for _ in range(3)] == [(0,), (1,), (0,)]
