"""The master's store failing under it (a full file system, as the chaos run makes one): nothing is
lost, nothing is half written, and the jobs go on once it writes again. The store is a real SQLite
store whose writes fail on demand."""

import sqlite3
from pathlib import Path
from typing import Any

import pytest

from gangsched.master.accounts import Account, Use
from gangsched.master.job_record import Job
from gangsched.master.sql_schema import SCHEMA_VERSION
from gangsched.master.sqlite_store import SqliteStore
from gangsched.master.store import StoreWriteError
from gangsched.protocol.messages import ErrorReply, ExitAck, Heartbeat, LaunchTask, StartStep, Submit, TaskExit
from gangsched.protocol.records import JobSpec, JobState, StepSpec, TaskRef
from tests.helpers.driven_master import DrivenMaster, FakeClock, driven_master
from tests.helpers.master_events import ENDPOINTS, SETTINGS, hello, infos, sent, submit
from tests.helpers.old_stores import jobs_as_version_15, running_jobs_of_version_15


class FailingCommits:
    """A connection to SQLite whose COMMIT fails while ``failing`` is set, as a disk that fails at the sync
    makes it fail: the transaction is still open, and the store rolls it back for real."""

    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection, self.failing = connection, False

    def execute(self, statement: str, *parameters: Any) -> sqlite3.Cursor:
        if statement == "COMMIT" and self.failing:
            raise sqlite3.OperationalError("disk I/O error")
        return self.connection.execute(statement, *parameters)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.connection, name)


class FailingStore(SqliteStore):
    """A real SQLite store whose writes fail while ``full`` is set, as a full file system makes them fail
    (the chaos run, gang bench chaos, fills a real one), and whose commits fail while ``commits.failing``
    is set."""

    def __init__(self, path: Path) -> None:
        super().__init__(path)
        self.path, self.full = path, False
        self.commits = FailingCommits(self._db)
        self._db = self.commits  # type: ignore[assignment]

    def _write(self, job: Job) -> None:
        self._refuse()
        super()._write(job)

    def _write_account(self, account: Account) -> None:
        self._refuse()
        super()._write_account(account)

    def _refuse(self) -> None:
        if self.full:
            raise sqlite3.OperationalError("database or disk is full")


@pytest.fixture
def failing_store(tmp_path) -> FailingStore:
    return FailingStore(tmp_path / "jobs.db")


def quantum(core: DrivenMaster, clock: FakeClock, nodes: tuple[str, ...]) -> None:
    """A quantum goes by, the nodes heard from."""
    clock.now += 0.1
    for node in nodes:
        core.node_reports.heartbeat(Heartbeat(node=node))
    core.tick()


def test_a_store_that_cannot_write_a_jobs_end_loses_nothing_and_releases_its_dependent_after(failing_store, clock):
    settings = SETTINGS.model_copy(update={"quantum_ms": 100})
    core = driven_master(settings, ENDPOINTS, failing_store, clock)
    for index in (1, 2):
        hello(core, f"n{index}")
    job = submit(core, nodes=2)
    dependent = core.clients.submit(Submit(spec=JobSpec(name="after", user="alice", tasks=2, argv=["true"],
                                                        after_ok=[job]))).job_id
    sent(core, LaunchTask)
    quantum(core, clock, ("n1", "n2"))  # the job runs a quantum: its user's use is counted at its end
    core.outbox.clear()
    failing_store.full = True
    for rank, node in enumerate(["n1", "n2"]):
        core.task_ended(TaskExit(node=node, job_id=job, rank=rank, returncode=0))
    first, waiting = infos(core, [job, dependent])
    assert first.state is JobState.RUNNING and waiting.state is JobState.PENDING  # memory follows the store
    assert SqliteStore(failing_store.path).get(job).state is JobState.RUNNING
    for _ in range(4):  # it stays so while the store cannot write, each try counted
        quantum(core, clock, ("n1", "n2"))
    assert core.store_retry.failures >= 2
    assert sent(core, LaunchTask) == []
    failing_store.full = False  # room again: within 2 quanta the end is written and the dependent starts
    for _ in range(2):
        quantum(core, clock, ("n1", "n2"))
    first, started = infos(core, [job, dependent])
    assert first.state is JobState.COMPLETED and started.state is JobState.RUNNING
    assert sorted(node for node, _ in sent(core, LaunchTask)) == ["n1", "n2"]
    assert SqliteStore(failing_store.path).get(job).state is JobState.COMPLETED
    assert core.users.query_users().users[0].used_processor_s > 0


def test_a_start_the_store_cannot_write_does_not_happen_and_the_job_starts_once_it_can(failing_store, clock):
    settings = SETTINGS.model_copy(update={"quantum_ms": 100})
    core = driven_master(settings, ENDPOINTS, failing_store, clock)
    for index in (1, 2):
        hello(core, f"n{index}")
    core.node_events.lose_node("n2", "n2 stopped")
    job = submit(core, nodes=2)  # one node up: it waits, written
    failing_store.full = True
    hello(core, "n2", incarnation="second")  # the policy places it; the store cannot write its start
    (info,) = infos(core, [job])
    assert info.state is JobState.PENDING and info.reason.startswith("start postponed"), info.reason
    assert sent(core, LaunchTask) == []  # memory follows the store: no task went out
    assert SqliteStore(failing_store.path).get(job).state is JobState.PENDING
    for _ in range(3):
        quantum(core, clock, ("n1", "n2"))
    assert core.store_retry.failures >= 2 and sent(core, LaunchTask) == []
    failing_store.full = False
    for _ in range(2):  # room again: within 2 quanta it starts
        quantum(core, clock, ("n1", "n2"))
    (info,) = infos(core, [job])
    assert info.state is JobState.RUNNING
    assert sorted(node for node, _ in sent(core, LaunchTask)) == ["n1", "n2"]
    assert SqliteStore(failing_store.path).get(job).state is JobState.RUNNING


def test_a_postponed_start_is_not_forgotten_when_a_later_write_goes_through_first(failing_store, clock):
    """The store has room again and another job's end is written before the retry is due: the
    postponed start is still tried, within 2 quanta (a chaos run found it waiting for ever)."""
    settings = SETTINGS.model_copy(update={"quantum_ms": 100})
    core = driven_master(settings, ENDPOINTS, failing_store, clock)
    for index in (1, 2):
        hello(core, f"n{index}")
    core.node_events.lose_node("n2", "n2 stopped")
    short = submit(core, nodes=1)  # runs on n1
    wide = submit(core, nodes=2)  # one node up: it waits, written
    failing_store.full = True
    hello(core, "n2", incarnation="second")  # placed; the store cannot write its start
    (waiting,) = infos(core, [wide])
    assert waiting.reason.startswith("start postponed"), waiting.reason
    late = core.clients.submit(Submit(spec=JobSpec(name="late", user="alice", tasks=1, argv=["true"])))
    assert isinstance(late, ErrorReply) and "the job store cannot write" in late.reason  # refused whole
    failing_store.full = False
    core.task_ended(TaskExit(node="n1", job_id=short, rank=0, returncode=0))  # written at once
    for _ in range(2):
        quantum(core, clock, ("n1", "n2"))
    first, started = infos(core, [short, wide])
    assert first.state is JobState.COMPLETED and started.state is JobState.RUNNING, started.reason


def on_disk(store: FailingStore, job_id: int) -> JobState | None:
    """The job's state as another connection reads the file: what is committed."""
    job = SqliteStore(store.path).get(job_id)
    return None if job is None else job.state


def test_a_commit_that_fails_in_the_middle_of_a_batch_keeps_nothing_of_it_and_writes_it_all_after(failing_store):
    spec = JobSpec(name="j", user="alice", tasks=1, argv=["true"])
    first, second = (Job(job_id=n, spec=spec, state=JobState.PENDING, submit_time=1.0) for n in (1, 2))
    failing_store.submitted([first], None)
    failing_store.commit()
    failing_store.commits.failing = True
    first.state, first.start_time = JobState.RUNNING, 2.0  # a batch: a start, a submission, an end
    failing_store.save(first)
    failing_store.submitted([second], "token-2")
    first.state, first.end_time = JobState.COMPLETED, 3.0
    failing_store.closed(first, ALICE)
    with pytest.raises(StoreWriteError):
        failing_store.commit()
    assert failing_store.pending
    assert (on_disk(failing_store, 1), on_disk(failing_store, 2)) == (JobState.PENDING, None)  # none of it
    assert failing_store.next_job_id() == 3 and failing_store.job_of_token("alice", "token-2") == 2
    second.state = JobState.CANCELLED  # a write while commits fail: kept, after the others
    failing_store.closed(second, None)
    with pytest.raises(StoreWriteError):
        failing_store.commit()
    failing_store.commits.failing = False
    failing_store.commit()  # everything, in order, at once
    assert not failing_store.pending
    assert (on_disk(failing_store, 1), on_disk(failing_store, 2)) == (JobState.COMPLETED, JobState.CANCELLED)
    assert SqliteStore(failing_store.path).accounts() == [ALICE]
    assert SqliteStore(failing_store.path).job_of_token("alice", "token-2") == 2


def test_a_write_that_fails_in_a_batch_is_rolled_back_alone(failing_store):
    spec = JobSpec(name="j", user="alice", tasks=1, argv=["true"])
    first, second = (Job(job_id=n, spec=spec, state=JobState.PENDING, submit_time=1.0) for n in (1, 2))
    failing_store.submitted([first], None)
    failing_store.full = True
    with pytest.raises(StoreWriteError):
        failing_store.closed(first, ALICE)  # the job written, then its user fails
    failing_store.full = False
    failing_store.submitted([second], None)
    failing_store.commit()
    assert (on_disk(failing_store, 1), on_disk(failing_store, 2)) == (JobState.PENDING, JobState.PENDING)
    assert SqliteStore(failing_store.path).accounts() == []


def test_while_commits_fail_the_master_goes_on_in_memory_and_a_restart_finds_the_last_commit(failing_store, clock):
    core = driven_master(SETTINGS, ENDPOINTS, failing_store, clock)
    hello(core, "n1")
    job = submit(core, nodes=1)
    assert on_disk(failing_store, job) is JobState.RUNNING
    failing_store.commits.failing = True
    later = submit(core, nodes=1)
    core.task_ended(TaskExit(node="n1", job_id=job, rank=0, returncode=0))
    assert [info.state for info in infos(core, [job, later])] == [JobState.COMPLETED, JobState.RUNNING]
    # a master killed now: the store holds the last commit, whole
    assert (on_disk(failing_store, job), on_disk(failing_store, later)) == (JobState.RUNNING, None)
    failing_store.commits.failing = False
    quantum(core, clock, ("n1",))
    assert (on_disk(failing_store, job), on_disk(failing_store, later)) == (JobState.COMPLETED, JobState.RUNNING)


def test_a_launch_lost_with_the_master_is_queued_again_not_failed(tmp_path, clock):
    """Killed after it committed a start and before the launch reached the node: the node daemon, the same
    one, has no trace of the job (it keeps each exit until the master acknowledges it, which it does only
    once the end is committed), so the start is undone. Another daemon lost it: the job fails."""
    store = SqliteStore(tmp_path / "jobs.db")
    core = driven_master(SETTINGS, ENDPOINTS, store, clock)
    hello(core, "n1")
    hello(core, "n2")
    lost_launch, lost_node = submit(core, nodes=1), submit(core, nodes=1)
    assert {info.state for info in infos(core, [lost_launch, lost_node])} == {JobState.RUNNING}
    node_of = {job: core.table.jobs[job].node_names[0] for job in (lost_launch, lost_node)}
    store.close()
    restarted = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(restarted, node_of[lost_launch])  # the daemon the launch went to, without it
    hello(restarted, node_of[lost_node], incarnation="second")  # a daemon started anew: what it ran is gone
    again, failed = infos(restarted, [lost_launch, lost_node])
    assert failed.state is JobState.NODE_FAIL
    assert again.state is JobState.RUNNING and again.requeues == 1  # queued again, and placed at once
    assert lost_launch in {message.task.job_id for _, message in sent(restarted, LaunchTask)}


ALICE = Account("alice", used=Use(processor_s=1.0, cpu_s=0.5, memory_byte_s=7.0))
# the users table before version 15
OLD_USERS = ('CREATE TABLE users ("user" TEXT PRIMARY KEY, political_priority DOUBLE PRECISION NOT NULL,'
             " quota_node_s DOUBLE PRECISION, used_node_s DOUBLE PRECISION NOT NULL)")


def test_a_store_of_an_earlier_version_is_migrated_and_keeps_its_jobs(tmp_path):
    path = tmp_path / "jobs.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)  # made as version 6 made it: no index of the jobs by state, no preemptions, no holds
    jobs_as_version_15(db.execute)
    db.execute("DROP INDEX jobs_by_state")
    db.execute("ALTER TABLE jobs DROP COLUMN preemptions")
    db.execute("ALTER TABLE jobs DROP COLUMN hold")
    db.execute("ALTER TABLE jobs DROP COLUMN live_ranks")
    db.execute("DROP TABLE node_marks")
    db.execute("DROP INDEX admin_log_by_token")
    db.execute("DROP TABLE admin_log")
    db.execute("DROP TABLE user_limits")
    db.execute("DROP TABLE reservations")
    db.execute("DROP TABLE users")
    db.execute(OLD_USERS)
    db.execute("INSERT INTO jobs (job_id, spec, state, reason, submit_time, node_names, processors, requeues,"
               " barriers, cpu_ns, ran_s, migration_s) VALUES (1, '{}', 'completed', '', 0, '[]', '[]', 0, 0, 0, 0,"
               " '[]')")
    db.execute("PRAGMA user_version=6")
    db.commit()
    db.close()
    store = SqliteStore(path)
    store.close()
    db = sqlite3.connect(path)
    assert db.execute("PRAGMA user_version").fetchone() == (SCHEMA_VERSION,)
    tables = {name for (name,) in db.execute("SELECT name FROM sqlite_master")}
    assert {"node_marks", "admin_log", "user_limits", "reservations"} <= tables
    assert db.execute("SELECT name FROM sqlite_master WHERE type = 'index' AND tbl_name = 'jobs'").fetchall() == [
        ("jobs_by_state",)]
    assert db.execute("SELECT job_id, state, preemptions, hold, steps FROM jobs").fetchall() == [
        (1, "completed", "[]", None, "[]")]
    db.close()


def test_a_store_of_version_15_keeps_each_running_job_s_launch_as_its_step_0(tmp_path):
    path = tmp_path / "jobs.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)
    jobs_as_version_15(db.execute)
    running_jobs_of_version_15(db.execute)
    db.execute("PRAGMA user_version=15")
    db.commit()
    db.close()
    store = SqliteStore(path)
    one, two = store.get(1), store.get(2)
    assert one is not None and two is not None
    assert list(one.steps) == [0] and one.live_tasks() == {(0, 1)}
    step = one.steps[0]
    assert (step.slots, step.barrier_port, step.rendezvous_port, step.spec) == ([0, 1], 5000, 29500, None)
    assert two.live_tasks() == {(0, 0), (0, 1)}, "a store before version 13 expects every rank"
    store.save(one)  # written again as version 16 writes it
    assert store.get(1).steps == one.steps
    store.close()
    db = sqlite3.connect(path)
    columns = {row[1] for row in db.execute("PRAGMA table_info(jobs)")}
    assert "steps" in columns and not columns & {"barrier_port", "rendezvous_port", "live_ranks"}
    db.close()


def test_a_store_of_version_14_keeps_its_users_use_under_the_names_of_what_it_counts(tmp_path):
    path = tmp_path / "jobs.db"
    SqliteStore(path).close()
    db = sqlite3.connect(path)  # its users as version 14 had them: node-seconds by name, nothing else accrued
    jobs_as_version_15(db.execute)
    db.execute("DROP TABLE users")
    db.execute(OLD_USERS)
    db.execute("INSERT INTO users VALUES ('alice', 0.5, 100.0, 42.0)")
    db.execute("PRAGMA user_version=14")
    db.commit()
    db.close()
    store = SqliteStore(path)
    assert store.accounts() == [Account("alice", 0.5, 100.0, Use(processor_s=42.0))]
    store.close()


def test_a_rank_end_acknowledged_before_a_restart_is_not_taken_for_a_vanished_rank(tmp_path, clock):
    """Rank 0 ended, acknowledged (its node forgets it), rank 1 still runs when the master is killed: the
    store has the rank's end, so the master that restarts expects only rank 1, and the job completes."""
    store = SqliteStore(tmp_path / "jobs.db")
    core = driven_master(SETTINGS, ENDPOINTS, store, clock)
    hello(core, "n1")
    hello(core, "n2")
    job = submit(core, nodes=2)
    first, second = core.table.jobs[job].node_names
    ack = core.task_ended(TaskExit(node=first, job_id=job, rank=0, returncode=0))
    assert (ack.job_id, ack.rank) == (job, 0)
    store.close()
    restarted = driven_master(SETTINGS, ENDPOINTS, SqliteStore(tmp_path / "jobs.db"), clock)
    hello(restarted, first)  # no trace of rank 0: its end was acknowledged
    hello(restarted, second, tasks=[TaskRef(job_id=job, rank=1)])
    (info,) = infos(restarted, [job])
    assert info.state is JobState.RUNNING, info.reason
    restarted.task_ended(TaskExit(node=second, job_id=job, rank=1, returncode=0))
    assert infos(restarted, [job])[0].state is JobState.COMPLETED


def test_a_rank_end_the_store_cannot_write_is_acknowledged_only_once_it_can(failing_store, clock):
    core = driven_master(SETTINGS, ENDPOINTS, failing_store, clock)
    hello(core, "n1")
    hello(core, "n2")
    job = submit(core, nodes=2)
    first = core.table.jobs[job].node_names[0]
    core.outbox.clear()
    failing_store.full = True
    assert core.task_ended(TaskExit(node=first, job_id=job, rank=0, returncode=0)) is None  # its node keeps it
    quantum(core, clock, ("n1", "n2"))
    assert [message for _, message in core.outbox if isinstance(message, ExitAck)] == []
    failing_store.full = False
    for _ in range(3):  # the next try, two quanta after the last
        quantum(core, clock, ("n1", "n2"))
    assert [(node, message.rank) for node, message in core.outbox if isinstance(message, ExitAck)] == [(first, 0)]
    assert SqliteStore(failing_store.path).get(job).live_tasks() == {(0, 1)}


def test_a_step_whose_start_the_store_cannot_write_does_not_start_and_leaves_its_ports(failing_store, clock):
    core = driven_master(SETTINGS, ENDPOINTS, failing_store, clock)
    hello(core, "n1")
    hello(core, "n2")
    job = submit(core, nodes=2)
    core.outbox.clear()
    failing_store.full = True
    refused = core.step_starts.start(StartStep(job_id=job, user="alice", step=StepSpec(argv=["x"])))
    assert isinstance(refused, ErrorReply) and "did not start" in refused.reason
    assert list(core.table.jobs[job].steps) == [0] and sent(core, LaunchTask) == []
    failing_store.full = False
    started = core.step_starts.start(StartStep(job_id=job, user="alice", step=StepSpec(argv=["x"])))
    assert started.step_id == 1, "numbered as if the refused one had never been"
    assert [launch.task.barrier_addr for _, launch in sent(core, LaunchTask)] == \
        [f"ipc:///tmp/alice/job-{job}.1.barrier"] * 2
