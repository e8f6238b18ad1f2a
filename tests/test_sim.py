"""The simulator: hand-checked schedules and invariants over random workloads."""

from collections import Counter

from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.policy.backfill import EasyPolicy, FcfsPolicy
from gangsched.sim.engine import simulate
from gangsched.sim.jobs import SimJob
from gangsched.sim.prepare import prepare
from gangsched.workload.swf import modelled_job


def jobs_of(*rows: tuple[float, int, float, float]) -> list[SimJob]:
    """(submit, procs, run time, estimate) per job, ids from 1."""
    return [SimJob(i, submit, run, estimate, procs) for i, (submit, procs, run, estimate) in enumerate(rows, 1)]


def starts(jobs: list[SimJob]) -> dict[int, float | None]:
    return {job.job_id: job.start for job in jobs}


WORKLOAD = (
    (0, 3, 10, 10),  # 1 holds 3 of 4 processors until 10
    (1, 4, 5, 5),  # 2 needs the machine: the head, reserved for 10
    (2, 1, 5, 5),  # 3 fits the free processor and ends by 7: EASY backfills it
    (3, 1, 20, 20),  # 4 fits too but would end at 23, past the head's start: it waits
)


def test_fcfs_keeps_arrival_order():
    jobs = jobs_of(*WORKLOAD)
    simulate(jobs, FcfsPolicy(4))
    assert starts(jobs) == {1: 0, 2: 10, 3: 15, 4: 15}


def test_easy_backfills_only_what_does_not_delay_the_head():
    jobs = jobs_of(*WORKLOAD)
    simulate(jobs, EasyPolicy(4))
    assert starts(jobs) == {1: 0, 2: 10, 3: 2, 4: 15}


def test_a_job_ending_early_frees_its_processors_at_once():
    jobs = jobs_of((0, 4, 2, 100), (1, 4, 1, 1))  # 1 was expected to run 100 s, runs 2
    simulate(jobs, EasyPolicy(4))
    assert starts(jobs) == {1: 0, 2: 2} and jobs[1].end == 3


def test_preparing_a_trace_counts_what_it_changes():
    records = [modelled_job(1, 0, 10, 4), modelled_job(2, 5, 10, 0), modelled_job(3, 6, 10, 9)]
    prepared = prepare(records, procs=8)
    assert [job.job_id for job in prepared.jobs] == [1] and prepared.dropped == 2
    assert prepared.awkward["dropped: wider than the machine"] == 1
    assert prepared.awkward["no estimate: used the run time"] == 1


workloads = st.lists(
    st.tuples(st.integers(0, 50), st.integers(1, 8), st.integers(0, 20), st.integers(0, 30)),
    min_size=1, max_size=25,
)


@settings(max_examples=200, deadline=None)
@given(workloads, st.sampled_from([FcfsPolicy, EasyPolicy]))
def test_every_job_runs_once_for_its_run_time_within_the_machine(rows, policy):
    jobs = jobs_of(*[(submit, procs, run, run + slack) for submit, procs, run, slack in rows])
    simulate(jobs, policy(8))
    for job in jobs:
        assert job.start is not None and job.end is not None
        assert job.start >= job.submit and job.end - job.start == job.run_time
    used: Counter[float] = Counter()
    for instant in {job.start for job in jobs}:
        used[instant] = sum(job.procs for job in jobs if job.start <= instant < job.end)
    assert max(used.values()) <= 8


class RecordingEasy(EasyPolicy):
    """EASY that remembers the first start it reserved for each head of the queue."""

    def __init__(self, procs: int) -> None:
        super().__init__(procs)
        self.reserved: dict[int, float] = {}

    def _shadow(self, needed: int, now: float) -> tuple[float, int]:
        shadow, extra = super()._shadow(needed, now)
        self.reserved.setdefault(self.queue[0].job_id, shadow)
        return shadow, extra


@settings(max_examples=200, deadline=None)
@given(workloads)
def test_easy_never_delays_the_head_past_its_reservation(rows):
    jobs = jobs_of(*[(submit, procs, run, run + slack) for submit, procs, run, slack in rows])
    policy = RecordingEasy(8)
    simulate(jobs, policy)
    for job in jobs:
        if job.job_id in policy.reserved:
            assert job.start is not None and job.start <= policy.reserved[job.job_id]


def test_the_same_workload_gives_the_same_schedule():
    rows = [(i % 7, 1 + i % 5, 3 + i % 11, 20) for i in range(200)]
    first, second = jobs_of(*rows), jobs_of(*rows)
    simulate(first, EasyPolicy(8))
    simulate(second, EasyPolicy(8))
    assert starts(first) == starts(second)
