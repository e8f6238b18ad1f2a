"""The strict gang policy as pure code: matrix, best-fit placement, rotation."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.policy.gang import Request, never_fits, round_robin, schedule
from gangsched.policy.matrix import Matrix

NODES = ["n1", "n2", "n3", "n4"]


def test_a_job_goes_to_the_fullest_row_that_holds_it():
    matrix = Matrix()
    schedule(matrix, [Request(1, 3), Request(2, 1), Request(3, 2)], NODES, mpl=4)
    # 1 fills 3 columns of row 0, 2 takes its last; 3 needs a new row
    assert matrix.table(NODES) == [[1, 1, 1, 2], [3, 3, None, None]]
    placements = schedule(matrix, [Request(4, 2)], NODES, mpl=4)
    assert placements[0].row == 1 and placements[0].nodes == ("n3", "n4")


def test_plain_gs_stops_at_the_first_job_that_does_not_fit():
    matrix = Matrix()
    placed = schedule(matrix, [Request(1, 4), Request(2, 4), Request(3, 1)], NODES, mpl=1)
    assert [p.job_id for p in placed] == [1]  # 3 would fit nowhere either, but 2 blocks it first


def test_the_mpl_caps_the_rows():
    matrix = Matrix()
    placed = schedule(matrix, [Request(job, 4) for job in range(1, 6)], NODES, mpl=3)
    assert len(placed) == 3 and len(matrix.rows) == 3


def test_an_emptied_row_is_dropped():
    matrix = Matrix()
    schedule(matrix, [Request(1, 4), Request(2, 4)], NODES, mpl=2)
    matrix.remove(1)
    assert matrix.table(NODES) == [[2, 2, 2, 2]]


def test_runnable_names_every_node():
    matrix = Matrix()
    schedule(matrix, [Request(1, 2), Request(2, 4)], NODES, mpl=2)
    assert matrix.runnable((0,), NODES) == {"n1": [1], "n2": [1], "n3": [], "n4": []}


def test_a_cell_cannot_hold_two_jobs():
    matrix = Matrix()
    matrix.place(1, 0, ["n1"])
    with pytest.raises(ValueError):
        matrix.place(2, 0, ["n1"])


def test_never_fits_only_when_wider_than_the_cluster():
    assert never_fits(5, 4) and never_fits(4, 4) is None


def test_round_robin_visits_every_row_in_turn():
    rows, chosen = 3, []
    previous = None
    for _ in range(7):
        (previous,) = round_robin(rows, previous)
        chosen.append(previous)
    assert chosen == [0, 1, 2, 0, 1, 2, 0]
    assert round_robin(0, 5) == ()
    assert round_robin(2, 4) == (1,)  # rows went away: carry on from what is left


@given(st.lists(st.integers(min_value=1, max_value=4), max_size=12), st.integers(1, 4))
def test_placements_never_share_a_cell_and_keep_their_columns(widths, mpl):
    matrix = Matrix()
    queue = [Request(job, width) for job, width in enumerate(widths, start=1)]
    placed = schedule(matrix, queue, NODES, mpl)
    assert [p.job_id for p in placed] == [r.job_id for r in queue[: len(placed)]]
    assert len(matrix.rows) <= mpl
    for placement in placed:
        assert len(placement.nodes) == len(set(placement.nodes))
        assert matrix.nodes_of(placement.job_id) == sorted(placement.nodes)
        assert matrix.rows_of(placement.job_id) == [placement.row]
