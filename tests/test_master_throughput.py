"""The master's part in a flood of small jobs, event by event on a fake clock: a processor a job frees is
used again in the same quantum, never beside a task that still runs there; arrays, their throttle, and the
master's limits."""

import gc
from pathlib import Path

import pytest
from pydantic import ValidationError

from gangsched.daemon.realtime import GrowthFreezer
from gangsched.master.routes import node_report_routes
from gangsched.master.settings import MasterSettings
from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.frames import JOBS_PER_REPLY
from gangsched.protocol.messages import Cancel, ErrorReply, Heartbeat, JobQuery, LaunchTask, Submit, TaskExit
from gangsched.protocol.records import JobSpec, JobState
from tests.helpers.driven_master import driven_master
from tests.helpers.master_events import ENDPOINTS, hello, infos, sent

SETTINGS = MasterSettings(quantum_ms=100, heartbeat_ms=100, heartbeat_misses=3, policy="gs", mpl=3,
                          state_dir=Path("/nonexistent"))


def submit_one(core, count: int = 1) -> list[int]:
    spec = JobSpec(name="j", user="alice", tasks=1, argv=["true"])
    return [core.clients.submit(Submit(spec=spec)).job_id for _ in range(count)]


def launched(core) -> dict[int, int | None]:
    """job -> the switch in whose idle processors its launch says to run at once (None: as its row does)"""
    return {message.task.job_id: message.run_in for _, message in sent(core, LaunchTask)}


def test_a_processor_freed_in_the_quantum_is_used_again_at_once(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    first, second = submit_one(core, 2)  # one processor: two rows
    assert launched(core) == {first: None, second: None}  # placed before any switch: they wait for theirs
    core.tick()
    row_running = core.matrices.default.rotation.ran
    assert row_running in ({first}, {second})
    (ended,) = row_running
    core.task_ended(TaskExit(node="n1", job_id=ended, rank=0, returncode=0))
    (third,) = submit_one(core)
    assert launched(core) == {third: core.broadcast.quantum}  # nothing else runs on its processor now
    assert third in core.matrices.default.rotation.ran


def test_a_job_placed_where_a_task_runs_this_quantum_waits_for_its_switch(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    first, second = submit_one(core, 2)
    sent(core, LaunchTask)
    core.tick()
    (running,) = core.matrices.default.rotation.ran
    waiting = second if running == first else first
    core.task_ended(TaskExit(node="n1", job_id=waiting, rank=0, returncode=0))  # ends while stopped
    (third,) = submit_one(core)
    assert launched(core) == {third: None}  # its processor is taken this quantum


def test_a_job_placed_at_a_quantum_boundary_starts_with_the_switch(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    (first,) = submit_one(core)
    sent(core, LaunchTask)
    core.tick()
    core.task_ended(TaskExit(node="n1", job_id=first, rank=0, returncode=0))
    core.matrices.default.rotation.quantum_over()  # as the boundary's tick does before its settle
    (second,) = submit_one(core)
    assert launched(core) == {second: None}


def submit_array(core, ranges, limit=None):
    spec = JobSpec(name="a", user="alice", tasks=1, argv=["true"])
    return core.clients.submit(Submit(spec=spec, array=ranges, array_limit=limit))


def test_an_array_with_a_throttle_runs_at_most_that_many_at_once_and_the_rest_in_index_order(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    for node in ("n1", "n2", "n3", "n4"):
        hello(core, node)
    first = submit_array(core, [(0, 5, 1)], limit=2).job_id  # room for all six, two at a time
    assert sorted(launched(core)) == [first, first + 1]
    (waiting,) = infos(core, [first + 2])
    assert waiting.reason == "JobArrayTaskLimit"
    core.clients.cancel(Cancel(job_id=first + 2, user="alice"))  # a throttled job cancelled never starts
    core.task_ended(TaskExit(node=node_of(core, first), job_id=first, rank=0, returncode=0))
    assert sorted(launched(core)) == [first + 3]
    for job in (first + 1, first + 3):
        core.task_ended(TaskExit(node=node_of(core, job), job_id=job, rank=0, returncode=0))
    assert sorted(launched(core)) == [first + 4, first + 5]


def node_of(core, job_id: int) -> str:
    return core.table.jobs[job_id].node_names[0]


def test_the_ends_one_drain_of_the_report_socket_brings_are_settled_in_one_scheduling_pass(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    for node in ("n1", "n2", "n3", "n4"):
        hello(core, node)
    first = submit_array(core, [(0, 7, 1)], limit=4).job_id  # four at a time
    running = sorted(launched(core))
    assert running == [first + index for index in range(4)]
    decisions = core.matrices.default.decisions.decision_time
    passes = decisions.count
    ended = node_report_routes(core.core)[TaskExit]  # as the master's loop routes them
    now = clock.read()
    for job in running:
        ended(b"", TaskExit(node=node_of(core, job), job_id=job, rank=0, returncode=0), now)
    assert launched(core) == {} and decisions.count == passes  # nothing decided yet
    core.scheduling_pass(now)  # as the loop does after the drain
    assert decisions.count == passes + 1
    assert sorted(launched(core)) == [first + index for index in range(4, 8)]


def test_a_submission_past_the_masters_limits_is_refused_whole_with_the_setting_named(tmp_path, clock):
    settings = SETTINGS.model_copy(update={"max_array_size": 10, "max_job_count": 5})
    core = driven_master(settings, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")
    refused = submit_array(core, [(0, 3, 1), (8, 10, 1)])
    assert isinstance(refused, ErrorReply) and "--max-array-size 10 (indices 0-9)" in refused.reason
    refused = submit_array(core, [(0, 5, 1)])
    assert isinstance(refused, ErrorReply) and "--max-job-count 5 (0 pending or running)" in refused.reason
    assert core.table.jobs == {} and core.store.next_job_id() == 1  # nothing kept
    assert submit_array(core, [(0, 4, 1)]).count == 5
    refused = submit_one_reply(core)
    assert isinstance(refused, ErrorReply) and "--max-job-count 5 (5 pending or running)" in refused.reason


def submit_one_reply(core):
    return core.clients.submit(Submit(spec=JobSpec(name="j", user="alice", tasks=1, argv=["true"])))


@pytest.mark.parametrize(("ranges", "limit", "why"), [
    ([(5, 1, 1)], None, "upwards"), ([(0, 9, 1), (5, 20, 1)], None, "overlap"), ([(0, 4, 1)], 0, "greater than"),
    ([(0, 4, 1)], 6, "at most its size"), (None, 2, "for an array"), ([(0, 4_000_001, 1)], None, "4000000"),
])
def test_a_malformed_array_is_refused_before_it_reaches_the_master(ranges, limit, why):
    with pytest.raises(ValidationError, match=why):
        Submit(spec=JobSpec(name="a", user="alice", tasks=1, argv=["true"]), array=ranges, array_limit=limit)


def test_jobs_taken_in_are_frozen_out_of_the_collectors_passes_and_freed_all_the_same_once_ended(tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    for node in ["n1", "n2"]:
        hello(core, node)
    freezer = GrowthFreezer(len(core.table.jobs))
    gc.collect()
    frozen = gc.get_freeze_count()
    try:
        for _ in range(2):  # two arrays of 1,000 (the most one may hold here), each in a turn of its own
            submit_array(core, [(0, 999, 1)])
            freezer.turn_ended(len(core.table.jobs))
        assert gc.get_freeze_count() >= frozen + 2000 * 5, "the jobs taken in left in the collector's passes"
        while core.table.jobs:  # every job runs and ends
            for job in core.table.running():
                core.task_ended(TaskExit(node=job.node_names[0], job_id=job.job_id, rank=0, returncode=0))
            clock.now += 0.05
            for node in ["n1", "n2"]:
                core.node_reports.heartbeat(Heartbeat(node=node))
            core.tick()
    finally:
        gc.unfreeze()
    # what only a full pass frees: frozen, it would have stayed
    cycles = gc.collect()
    assert cycles < 2000, f"{cycles} objects in reference cycles after 2,000 jobs ended"


def test_a_page_of_a_listing_explains_the_waiting_jobs_only_as_far_as_it_shows_and_counts_explain_them_all(
        tmp_path, clock):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(core, "n1")  # one processor, three rows: three jobs run, the rest wait
    submit_array(core, [(0, 999, 1)])
    page = core.clients.query_jobs(JobQuery(states=[JobState.PENDING]))
    assert len(page.jobs) == JOBS_PER_REPLY and page.more
    assert [job.reason for job in page.jobs[:2]] == ["Resources", "Priority"]
    explained = [job.job_id for job in core.table.jobs.values() if job.wait is not None]
    assert max(explained) == page.jobs[-1].job_id, "jobs past the page explained for it"
    counts = {(count.state, count.reason): count.count for count in core.clients.count_jobs().counts}
    assert counts == {(JobState.RUNNING, ""): 3, (JobState.PENDING, "Resources"): 1,
                      (JobState.PENDING, "Priority"): 996}
