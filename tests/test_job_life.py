"""A job's life through its named transitions (master/job_record.py): each checked against where the job
is, an illegal one raised in tests and, in a running master, logged and refused with the job as it was."""

import logging

import pytest

from gangsched.master import job_record
from gangsched.master.job_record import IllegalTransition, Job
from gangsched.master.waiting import WaitKind
from gangsched.policy.live_scheduler import Processor
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.protocol.records import Hold, JobSpec, JobState


def pending_job() -> Job:
    return Job(job_id=7, spec=JobSpec(name="j", user="alice", tasks=2, argv=["true"]), state=JobState.PENDING,
               submit_time=1000.0)


def running_job() -> Job:
    job = pending_job()
    job.started(1001.0)
    job.placed([Processor("n1", 0), Processor("n2", 0)], {"n1": "a", "n2": "b"}, 5000, None)
    return job


def test_a_job_goes_from_pending_through_running_to_its_final_state():
    job = running_job()
    assert job.state is JobState.RUNNING and job.live_tasks() == {(0, 0), (0, 1)} and job.node_names == ["n1", "n2"]
    job.ranks_gone(0, {1}, exit_code=3, wall=1.0)
    assert job.end_decided(JobState.FAILED, "rank 1 exited with 3")
    assert not job.end_decided(JobState.CANCELLED, "too late"), "the first cause decides"
    job.ranks_gone(0, {0}, exit_code=None, wall=1.0)
    job.closing(JobState.FAILED)
    written = job.as_closed(JobState.FAILED, 1002.0)
    assert job.state is JobState.RUNNING, "the job is not changed until the store has its close"
    job.closed(written)
    assert (job.state, job.end_time, job.exit_code, job.reason) == (JobState.FAILED, 1002.0, 3,
                                                                     "rank 1 exited with 3")


def test_a_requeue_is_a_new_pending_record_reset_in_one_place():
    job = running_job()
    job.end_decided(JobState.PENDING, "requeued by alice")
    job.ranks_gone(0, {0, 1}, exit_code=None, wall=1.0)
    again = job.requeued(UtilizationPredictor())
    assert again is not job and job.state is JobState.RUNNING
    assert (again.state, again.requeues, again.node_names, again.steps, again.ending, again.start_time) == \
        (JobState.PENDING, 1, [], {}, None, None)
    assert again.wait is not None and again.wait.kind is WaitKind.REQUEUED
    again.started(1005.0)  # it runs again as any pending job
    assert again.state is JobState.RUNNING


def test_a_hold_and_its_release_are_a_pending_job_s():
    job = pending_job()
    job.held(by_root=False)
    assert job.hold is Hold.USER
    job.released()
    assert job.hold is None
    with pytest.raises(IllegalTransition, match="job 7: released while pending"):
        job.released()
    with pytest.raises(IllegalTransition, match="held while running"):
        running_job().held(by_root=True)


@pytest.mark.parametrize("transition", [
    lambda job: job.started(1.0),
    lambda job: job.waits(None),
    lambda job: job.resumed(1.0),
    lambda job: job.placed([Processor("n1", 1)], {}, None, None),
])
def test_an_illegal_transition_raises_in_tests(transition):
    with pytest.raises(IllegalTransition):
        transition(running_job())


def test_a_closed_job_takes_no_transition():
    job = running_job()
    job.end_decided(JobState.CANCELLED, "by alice")
    job.ranks_gone(0, {0, 1}, None, 1.0)
    job.closed(job.as_closed(JobState.CANCELLED, 1003.0))
    for transition in (lambda: job.end_decided(JobState.FAILED, "x"), lambda: job.closing(JobState.FAILED),
                       lambda: job.respecified(job.spec)):
        with pytest.raises(IllegalTransition, match="while cancelled"):
            transition()


def test_a_running_master_logs_an_illegal_transition_and_leaves_the_job_as_it_was(monkeypatch, caplog):
    monkeypatch.setattr(job_record, "_raising", False)  # as a master runs: nothing raises out of a handler
    job = running_job()
    before = (job.state, job.start_time, job.live_tasks())
    with caplog.at_level(logging.ERROR, logger="gangsched.master"):
        job.started(2000.0)
    assert (job.state, job.start_time, job.live_tasks()) == before
    assert "job 7: started while running: refused" in caplog.text
