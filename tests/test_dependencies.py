"""Slurm's dependencies beyond afterok and afterany, and --begin, on the master's core driven on a fake clock:
afternotok waits for a failure and is cancelled by a success; singleton runs one job of a user's name at a
time, in the order they came; a job waits as BeginTime until its --begin comes, through a master restart.
Nothing here starts a process."""

from gangsched.master.sqlite_store import SqliteStore
from gangsched.protocol.messages import Heartbeat, LaunchTask, Submit, TaskExit
from gangsched.protocol.records import JobSpec, JobState, TaskRef
from gangsched.protocol.times import format_time
from tests.helpers.driven_master import driven_master
from tests.helpers.master_events import ENDPOINTS, SETTINGS, hello, infos, sent


def make(tmp_path, clock, nodes: int = 2):
    core = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    for number in range(1, nodes + 1):
        hello(core, f"n{number}")
    return core


def submitted(core, name: str = "j", user: str = "alice", **fields) -> int:
    return core.clients.submit(Submit(spec=JobSpec(name=name, user=user, tasks=1, argv=["true"], **fields))).job_id


def ended(core, job: int, returncode: int = 0) -> None:
    (info,) = infos(core, [job])
    core.task_ended(TaskExit(node=info.node_names[0], job_id=job, rank=0, returncode=returncode))


def state(core, job: int) -> tuple[JobState, str]:
    (info,) = infos(core, [job])
    return info.state, info.reason


def started(core) -> set[int]:
    return {message.task.job_id for _, message in sent(core, LaunchTask)}


def test_afternotok_starts_after_a_failure_and_is_cancelled_by_a_success(tmp_path, clock):
    core = make(tmp_path, clock)
    failing, succeeding = submitted(core), submitted(core)
    on_failure = submitted(core, after_not_ok=[failing])
    on_success = submitted(core, after_not_ok=[succeeding])
    assert started(core) == {failing, succeeding}
    assert state(core, on_failure) == (JobState.PENDING, f"Dependency: waits for {failing}")
    ended(core, failing, returncode=3)
    ended(core, succeeding)
    assert started(core) == {on_failure}
    assert state(core, on_success) == (JobState.CANCELLED, f"DependencyNeverSatisfied: job {succeeding} COMPLETED "
                                                           "(afternotok)")


def test_singletons_of_a_user_s_name_run_one_at_a_time_in_the_order_they_came(tmp_path, clock):
    core = make(tmp_path, clock, nodes=4)
    first = submitted(core, name="sing", singleton=True)
    second = submitted(core, name="sing", singleton=True)
    third = submitted(core, name="sing", singleton=True)
    others = [submitted(core, name="other", singleton=True), submitted(core, name="sing", user="bob",
                                                                         singleton=True)]
    assert started(core) == {first, *others}, "another name and another user's are not held back"
    assert state(core, second) == (JobState.PENDING, f"Dependency: waits for {first}")
    assert state(core, third) == (JobState.PENDING, f"Dependency: waits for {first}")
    ended(core, first, returncode=1)  # any end releases it, as afterany
    assert started(core) == {second}
    assert state(core, third) == (JobState.PENDING, f"Dependency: waits for {second}")
    plain = submitted(core, name="sing")  # not a singleton: it runs beside them, and holds the next back
    assert started(core) == {plain}
    ended(core, second)
    assert started(core) == set() and state(core, third) == (JobState.PENDING, f"Dependency: waits for {plain}")
    ended(core, plain)
    assert started(core) == {third}


def test_a_job_waits_for_its_begin_time_through_a_restart_and_starts_when_it_comes(tmp_path, clock):
    core = make(tmp_path, clock)
    begin = clock.now + 30
    later = submitted(core, begin_time=begin)
    now = submitted(core, begin_time=clock.now - 5)  # a time gone: eligible at once
    assert started(core) == {now}
    assert state(core, later) == (JobState.PENDING, f"BeginTime: eligible at {format_time(begin)}")
    clock.now += 20
    again = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    for node in ("n1", "n2"):
        hello(again, node, [TaskRef(job_id=now, rank=0)] if node == infos(again, [now])[0].node_names[0] else [])
    again.tick()
    assert started(again) == set() and state(again, later)[0] is JobState.PENDING
    for _ in range(105):  # ten seconds of quanta and a half, the nodes' heartbeats in each
        clock.now += 0.1
        for node in ("n1", "n2"):
            again.node_reports.heartbeat(Heartbeat(node=node))
        again.tick()
    assert started(again) == {later}
