"""The batch policies in node names, as the live master runs them (policy/live_scheduler.py)."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from gangsched.policy.catalog import Choice
from gangsched.policy.columns import lowest_columns
from gangsched.policy.live_scheduler import LiveScheduler, NodeShape, PolicyJob, Processor
from gangsched.policy.quantum import round_robin

NODES = ["n1", "n2", "n3", "n4"]


def scheduler(policy: str = "gs", mpl: int = 4, nodes: list[str] = NODES, processors: int = 1) -> LiveScheduler:
    live = LiveScheduler(Choice(policy=policy, mpl=mpl), longest_estimate=100.0)
    live.rebuild(dict.fromkeys(nodes, NodeShape(processors, 1 << 30)), 0.0)
    return live


def job(job_id: int, procs: int, estimate: float = 10.0, nodes: int | None = None,
        per_node: int | None = None) -> PolicyJob:
    return PolicyJob(job_id=job_id, submit=0.0, procs=procs, estimate=estimate, nodes=nodes, tasks_per_node=per_node)


def names(starts: dict[int, list[Processor]]) -> dict[int, list[str]]:
    """Each started job's nodes, rank by rank (one processor per node)."""
    return {job_id: [processor.node for processor in processors] for job_id, processors in starts.items()}


def scheduled(policy: str, *widths: int, mpl: int = 4) -> LiveScheduler:
    """Jobs 1, 2, ... of these widths submitted and scheduled at time 0."""
    live = scheduler(policy, mpl)
    for job_id, width in enumerate(widths, start=1):
        live.submit(job(job_id, width), 0.0)
    live.schedule(0.0)
    return live


def table(live: LiveScheduler) -> list[list[int | None]]:
    return [[row.get(processor) for processor in live.columns] for row in live.rows]


def test_a_job_goes_to_the_fullest_row_that_holds_it_on_named_nodes():
    live = scheduler()
    for job_id, width in [(1, 3), (2, 1), (3, 2)]:
        live.submit(job(job_id, width), 0.0)
    starts = names(live.schedule(0.0).starts)
    assert starts == {1: ["n1", "n2", "n3"], 2: ["n4"], 3: ["n1", "n2"]}
    assert table(live)[0] == [1, 1, 1, 2]


def test_plain_gs_stops_at_the_first_job_that_does_not_fit():
    live = scheduled("gs", 4, 4, 1, mpl=1)
    assert live.nodes_of(1) == set(NODES)
    assert live.is_waiting(2) and live.is_waiting(3)


def test_space_sharing_policies_name_nodes_too():
    live = scheduler("easy")
    for job_id, width in [(1, 3), (2, 2), (3, 1)]:
        live.submit(job(job_id, width), 0.0)
    assert names(live.schedule(0.0).starts) == {1: ["n1", "n2", "n3"], 3: ["n4"]}
    live.finish(1, 5.0)
    assert names(live.schedule(5.0).starts) == {2: ["n1", "n2"]}


def test_a_job_wider_than_the_nodes_up_waits_until_they_are():
    live = scheduler(nodes=NODES[:2])
    live.submit(job(1, 3), 0.0)
    assert live.schedule(0.0).starts == {} and live.is_held(1)
    live.rebuild(dict.fromkeys(NODES, NodeShape(1, 1 << 30)), 1.0)
    assert names(live.schedule(1.0).starts) == {1: ["n1", "n2", "n3"]}


def test_a_rebuild_keeps_running_jobs_on_their_nodes():
    live = scheduled("bgs", 2, 2)
    live.finish(1, 1.0)
    live.rebuild(dict.fromkeys(["n3", "n4", "n5"], NodeShape(1, 1 << 30)), 1.0)  # n1, n2 gone; n5 new
    assert live.nodes_of(2) == {"n3", "n4"}
    live.submit(job(3, 3), 1.0)
    assert names(live.schedule(1.0).starts) == {3: ["n3", "n4", "n5"]}  # a second row


def test_a_rebuild_refuses_a_running_job_on_a_lost_node():
    live = scheduled("gs", 4)
    with pytest.raises(ValueError):
        live.rebuild(dict.fromkeys(NODES[:3], NodeShape(1, 1 << 30)), 1.0)


@pytest.mark.parametrize("policy", ["fcfs", "easy", "conservative", "slack", "gs", "bgs", "mbgs"])
def test_a_withdrawn_job_never_starts_and_the_job_behind_it_takes_its_turn(policy):
    live = scheduled(policy, 4, 4, 4, mpl=1)  # one row: job 1 runs, 2 and 3 wait in turn
    live.withdraw(2, 1.0)
    assert live.schedule(1.0).starts == {}  # the machine is still full
    live.finish(1, 2.0)
    assert list(live.schedule(2.0).starts) == [3]


def test_a_large_job_withdrawn_leaves_the_large_jobs_queue():
    live = scheduler("gs-largeq")
    for job_id in (1, 2, 3):  # large (estimate past alpha x the longest); at most two share a processor
        live.submit(job(job_id, 4, estimate=80.0), 0.0)
    assert set(live.schedule(0.0).starts) == {1, 2}
    live.withdraw(3, 1.0)
    live.finish(1, 2.0)
    assert live.schedule(2.0).starts == {}


def test_a_withdrawn_job_leaves_the_running_jobs_where_they_are():
    live = scheduled("gs", 2, 2, 4, 4, mpl=2)  # 1 and 2 share row 0, 3 has row 1, 4 waits
    before = table(live)
    live.withdraw(4, 1.0)
    live.schedule(1.0)
    assert table(live) == before


def test_round_robin_visits_every_row_in_turn():
    rows, chosen = 3, []
    previous = None
    for _ in range(7):
        previous = round_robin(rows, previous)
        chosen.append(previous)
    assert chosen == [0, 1, 2, 0, 1, 2, 0]
    assert round_robin(0, 5) is None
    assert round_robin(2, 4) == 1  # rows went away: carry on from what is left


@given(st.lists(st.integers(min_value=1, max_value=4), max_size=12), st.integers(1, 4),
       st.sampled_from(["gs", "bgs", "easy", "conservative", "slack"]))
def test_no_two_jobs_share_a_node_in_a_row_and_a_job_keeps_its_nodes(widths, mpl, policy):
    live = scheduler(policy, mpl)
    for job_id, width in enumerate(widths, start=1):
        live.submit(job(job_id, width), 0.0)
    starts = live.schedule(0.0).starts
    assert len(live.rows) <= mpl
    for row in live.layout:
        taken = 0
        for columns in row.values():
            assert not columns & taken
            taken |= columns
    for job_id, processors in starts.items():
        assert len(processors) == widths[job_id - 1] == len(set(processors))
        assert live.processors_of(job_id) == processors


def test_tasks_fill_a_node_processors_before_the_next_node_in_rank_order():
    live = scheduler("gs", nodes=["n1", "n2"], processors=2)
    live.submit(job(1, 3), 0.0)
    assert live.schedule(0.0).starts == {1: [Processor("n1", 0), Processor("n1", 1), Processor("n2", 0)]}


@pytest.mark.parametrize("policy", ["gs", "bgs", "easy", "conservative", "slack"])
def test_nodes_and_tasks_per_node_shape_the_placement(policy):
    live = scheduler(policy, nodes=["n1", "n2", "n3"], processors=2)
    live.submit(job(1, 1), 0.0)  # takes n1:0, so n1 holds only one more task
    live.submit(job(2, 4, nodes=2), 0.0)  # two on each of two nodes: n2 and n3
    live.submit(job(3, 3, per_node=1), 0.0)  # one on each of three nodes: waits under space sharing
    starts = live.schedule(0.0).starts
    assert starts[1] == [Processor("n1", 0)]
    assert names({2: starts[2]})[2] == ["n2", "n2", "n3", "n3"]
    if policy in ("gs", "bgs"):  # a second row has every node free
        assert names({3: starts[3]})[3] == ["n1", "n2", "n3"]
    else:
        assert 3 not in starts


@pytest.mark.parametrize("policy", ["gs", "bgs", "easy", "conservative", "slack"])
def test_a_task_of_several_processors_has_them_all_on_one_node(policy):
    live = scheduler(policy, nodes=["n1", "n2", "n3"], processors=2)
    live.submit(job(1, 1), 0.0)  # takes n1:0: n1's one free processor holds no task of two
    live.submit(PolicyJob(job_id=2, submit=0.0, procs=4, estimate=10.0, cpus_per_task=2), 0.0)
    starts = live.schedule(0.0).starts
    assert names({2: starts[2]})[2] == ["n2", "n2", "n3", "n3"]


@given(st.lists(st.integers(0, 4), min_size=1, max_size=6), st.integers(1, 3), st.integers(1, 6), st.data())
def test_a_placement_of_tasks_of_several_processors_is_whole_tasks_on_each_node(free_counts, grain, tasks, data):
    from gangsched.policy.topology import Topology

    topology = Topology.of([4] * len(free_counts))
    free = 0
    for index, count in enumerate(free_counts):
        free |= ((1 << count) - 1) << (4 * index)
    shaped = PolicyJob(job_id=1, submit=0.0, procs=tasks * grain, estimate=1.0, cpus_per_task=grain,
                       nodes=data.draw(st.sampled_from([None, 1, 2])) if tasks >= 2 else None)
    chosen = topology.choose(free, shaped)
    room = sum(count // grain for count in free_counts)
    if shaped.nodes is None:
        assert (chosen is not None) == (room >= tasks), "it fits exactly when whole tasks fit"
    if chosen is not None:
        assert chosen & ~free == 0 and chosen.bit_count() == tasks * grain
        on_node = [(chosen & mask).bit_count() for mask in topology.node_columns]
        assert all(count % grain == 0 for count in on_node), on_node
        if shaped.nodes is not None:
            assert sum(1 for count in on_node if count) == shaped.nodes


def test_a_shape_the_nodes_up_can_never_hold_is_held():
    live = scheduler("gs", nodes=["n1", "n2"], processors=2)
    live.submit(job(1, 3, per_node=1), 0.0)  # three nodes needed
    assert live.schedule(0.0).starts == {} and live.is_held(1)


@given(st.integers(min_value=1, max_value=(1 << 300) - 1), st.data())
def test_a_job_takes_the_lowest_free_columns(mask, data):
    count = data.draw(st.integers(1, mask.bit_count()))
    chosen = lowest_columns(mask, count)
    highest = chosen.bit_length() - 1
    assert chosen & ~mask == 0 and chosen.bit_count() == count
    assert mask & ((1 << highest) - 1) == chosen & ((1 << highest) - 1)  # no free column below it is left out
