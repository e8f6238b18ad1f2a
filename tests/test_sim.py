"""The simulator: hand-checked schedules and invariants over random workloads."""

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gangsched.policy.backfill import ConservativePolicy, EasyPolicy, FcfsPolicy
from gangsched.policy.interface import Job
from gangsched.policy.slack import SlackPolicy
from gangsched.policy.slack_settings import Heuristic, SlackSettings
from gangsched.sim.engine import simulate
from gangsched.sim.metrics import bounded_slowdown, confidence_interval, pyss_selection
from gangsched.sim.output import write_schedule
from gangsched.sim.prepare import prepare, prepare_as_pyss
from gangsched.sim.sim_job import SimJob
from gangsched.workload.swf import modelled_job, read_swf, write_swf
from tests.helpers.workloads import estimated, workloads


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


FIG_4 = tuple((0, procs, run, run) for procs, run in ((4, 10), (4, 20), (8, 10), (6, 10), (4, 10)))


def test_zhang_2000_fig_4_backfilling_fills_the_hole_before_job_3():
    """8 processors: job 3 waits for job 2; backfilling runs job 5 in the hole between job 1 and job 3."""
    for policy, job_5 in ((FcfsPolicy, 40), (EasyPolicy, 10), (ConservativePolicy, 10)):
        jobs = jobs_of(*FIG_4)
        simulate(jobs, policy(8))
        assert starts(jobs) == {1: 0, 2: 0, 3: 20, 4: 30, 5: job_5}, policy.name


def test_easy_delays_a_queued_job_that_conservative_protects():
    jobs = [
        (0, 2, 10, 10),  # 1 holds 2 of 4 processors until 10
        (1, 3, 10, 10),  # 2, the head: reserved at 10, leaving 1 processor spare
        (2, 4, 10, 10),  # 3 needs the machine: after 2, at 20
        (3, 1, 100, 100),  # 4 fits now on the spare processor, but holds it past 20
    ]
    easy, conservative = jobs_of(*jobs), jobs_of(*jobs)
    simulate(easy, EasyPolicy(4))
    simulate(conservative, ConservativePolicy(4))
    assert starts(easy) == {1: 0, 2: 10, 3: 103, 4: 3}
    assert starts(conservative) == {1: 0, 2: 10, 3: 20, 4: 30}


def test_slack_delays_a_job_within_its_slack_when_that_is_cheaper():
    """A wide job may wait a little so that a narrow one starts at once instead of waiting long."""
    jobs = jobs_of(
        (0, 4, 10, 10),  # 1 has the machine until 10
        (1, 4, 10, 10),  # 2 planned at 10
        (2, 1, 10, 10),  # 3: conservatively at 20; with slack, before 2
    )
    simulate(jobs, SlackPolicy(4, SlackSettings(slack_factor=1, average_wait_s=100)))
    assert starts(jobs) == {1: 0, 2: 20, 3: 10}


def test_a_job_ending_early_frees_its_processors_at_once():
    jobs = jobs_of((0, 4, 2, 100), (1, 4, 1, 1))  # 1 was expected to run 100 s, runs 2
    simulate(jobs, EasyPolicy(4))
    assert starts(jobs) == {1: 0, 2: 2} and jobs[1].end == 3


def test_preparing_a_trace_counts_what_it_changes():
    records = [modelled_job(1, 0, 10, 4), modelled_job(2, 5, 10, 0), modelled_job(3, 6, 10, 9),
               modelled_job(4, 7, 0, 2)]
    prepared = prepare(records, procs=8)
    assert [job.job_id for job in prepared.jobs] == [1, 4] and prepared.dropped == 2
    assert prepared.awkward["dropped: wider than the machine"] == 1
    assert prepared.awkward["no estimate: used the run time"] == 2
    assert prepared.awkward["zero estimate: 1 s"] == 1 and prepared.jobs[1].estimate == 1


def test_pyss_reads_a_trace_its_own_way():
    """pyss cuts a run to its estimate, narrows a job to the machine, and makes a record without run time
    or processors a 1-second serial job; times are whole seconds."""
    records = [modelled_job(1, 0, 100.7, 4)._replace(req_time=50),
               modelled_job(2, 5, 10, 9)._replace(req_time=20),
               modelled_job(3, 6, 0, 2), modelled_job(4, 7, 10, 0)]
    jobs = {job.job_id: job for job in prepare_as_pyss(records, procs=8).jobs}
    assert (jobs[1].run_time, jobs[1].estimate) == (50, 100)
    assert (jobs[2].procs, jobs[2].run_time, jobs[2].estimate) == (8, 10, 20)
    assert [(jobs[i].run_time, jobs[i].estimate, jobs[i].procs) for i in (3, 4)] == [(1, 1, 2), (1, 1, 1)]


def test_pyss_averages_over_fewer_jobs_with_the_same_bounded_slowdown():
    """Its bounded slowdown max(1, (w + r) / max(r, 10)) is ours; it leaves out 1-second serial jobs, the first
    1 % to end, and every job from the first that ends after the last submission on."""
    jobs = [SimJob(job_id, submit=float(job_id), run_time=5.0 + job_id % 30, estimate=50.0, procs=1 + job_id % 3)
            for job_id in range(1, 301)]
    jobs.append(SimJob(301, submit=2.0, run_time=1, estimate=1, procs=1))  # pyss's stand-in for a broken record
    for job in jobs:
        job.start = job.submit + job.job_id % 7
        job.end = job.start + job.run_time
    kept = pyss_selection(jobs)
    by_end = sorted(jobs, key=lambda job: (job.end, job.job_id))
    assert 301 not in {job.job_id for job in kept}
    assert kept[0] is next(job for job in by_end[3:] if job.job_id != 301)  # 300 jobs counted: the first 3 out
    assert all(job.end <= 300 for job in kept) and len(kept) == len([j for j in by_end[3:] if j.end <= 300
                                                                     and j.job_id != 301])
    for job in jobs:
        wait, run = job.start - job.submit, job.run_time
        assert bounded_slowdown(job) == pytest.approx(max(1, (wait + run) / max(run, 10)))


WORKLOADS = workloads(last_submit=50)


SPACE_SHARING = [FcfsPolicy, EasyPolicy, ConservativePolicy, SlackPolicy,
                 lambda procs: SlackPolicy(procs, SlackSettings(heuristic=Heuristic.DC, average_wait_s=20))]


@settings(max_examples=200, deadline=None)
@given(WORKLOADS, st.sampled_from(SPACE_SHARING))
def test_every_job_runs_once_for_its_run_time_within_the_machine(rows, policy):
    jobs = estimated(rows)
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
@given(WORKLOADS)
def test_easy_never_delays_the_head_past_its_reservation(rows):
    jobs = estimated(rows)
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


class RecordingConservative(ConservativePolicy):
    def __init__(self, procs: int) -> None:
        super().__init__(procs)
        self.reserved: dict[int, float] = {}

    def submit(self, job: Job, now: float) -> None:
        super().submit(job, now)
        self.reserved[job.job_id] = self.planned[job.job_id].start


@settings(max_examples=200, deadline=None)
@given(WORKLOADS)
def test_conservative_never_delays_a_job_past_its_first_reservation(rows):
    jobs = estimated(rows)
    policy = RecordingConservative(8)
    simulate(jobs, policy)
    assert all(job.start is not None and job.start <= policy.reserved[job.job_id] for job in jobs)


class RecordingSlack(SlackPolicy):
    """Slack backfilling that remembers each job's latest start allowed: first plan plus initial slack."""

    def __init__(self, procs: int, heuristic: Heuristic) -> None:
        super().__init__(procs, SlackSettings(heuristic=heuristic, average_wait_s=15))
        self.latest: dict[int, float] = {}

    def submit(self, job: Job, now: float) -> None:
        super().submit(job, now)
        plan = self.planned[job.job_id]
        self.latest[job.job_id] = plan.start + plan.initial_slack


@settings(max_examples=150, deadline=None)
@given(WORKLOADS, st.sampled_from(list(Heuristic)))
def test_slack_is_never_exceeded(rows, heuristic):
    jobs = estimated(rows)
    policy = RecordingSlack(8, heuristic)
    simulate(jobs, policy)
    assert all(job.start is not None and job.start <= policy.latest[job.job_id] + 1e-6 for job in jobs)


def test_a_confidence_interval_is_students_t_over_the_seeds():
    mean, half = confidence_interval([1.0, 2.0, 3.0])
    assert mean == 2.0 and half == pytest.approx(4.303 * 1.0 / 3 ** 0.5)
    assert confidence_interval([5.0]) == (5.0, 0.0)


def test_a_log_s_user_ids_go_with_its_jobs_through_the_simulator_and_out(tmp_path):
    trace = tmp_path / "users.swf"
    write_swf(trace, [modelled_job(1, 0.0, 10.0, 2)._replace(user=7, req_time=10.0),
                      modelled_job(2, 1.0, 10.0, 2)._replace(req_time=10.0)], ["; MaxProcs: 4"])
    jobs = prepare(read_swf(trace).jobs, 4).jobs
    assert [job.user for job in jobs] == ["7", ""]
    scheduled = tmp_path / "out.swf"
    write_schedule(scheduled, jobs, 4, "test")
    assert [record.user for record in read_swf(scheduled).jobs] == [7, -1]
