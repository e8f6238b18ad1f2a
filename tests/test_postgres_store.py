"""The store on PostgreSQL beside the store on SQLite: the same answers to the same writes, each write
whole or rolled back alone, group commit, a master that runs and restarts on it, and one line for a
store that cannot be used. The server is Debian's PostgreSQL, started by the tests in a folder of
their own under an unprivileged account, on a Unix socket only (deploy/postgres_server.py)."""

from typing import Any

import psycopg
import pytest

from gangsched.master.accounts import Account, Use
from gangsched.master.job_record import Job
from gangsched.master.job_steps import Step
from gangsched.master.nodes import NodeMark
from gangsched.master.postgres_store import PostgresStore
from gangsched.master.sql_schema import SCHEMA_VERSION
from gangsched.master.sqlite_store import SqliteStore
from gangsched.master.store import JobStore, StoreError, StoreWriteError
from gangsched.protocol.messages import Heartbeat, JobQuery, Submit, TaskExit
from gangsched.protocol.records import (
    Hold,
    JobSpec,
    JobState,
    NodeReason,
    NodeState,
    Preemption,
    StepSpec,
    UserLimits,
)
from gangsched.protocol.reservation_messages import ReservationInfo
from tests.helpers.driven_master import driven_master
from tests.helpers.master_events import ENDPOINTS, SETTINGS, hello
from tests.helpers.old_stores import jobs_as_version_15, running_jobs_of_version_15


def job(job_id: int, state: JobState = JobState.PENDING, **fields: Any) -> Job:
    spec = JobSpec(name=f"j{job_id}", user="alice", tasks=2, argv=["true"], partition="batch")
    return Job(job_id=job_id, spec=spec, state=state, submit_time=1000.0 + job_id, **fields)


def exercise(store: JobStore) -> list[Any]:
    """Every kind of write, and every read after them: what the store answers."""
    answers: list[Any] = []
    store.submitted([job(1), job(2)], "token-1")
    store.submitted([job(3, hold=Hold.USER)], None)
    store.commit()
    answers.append((store.job_of_token("alice", "token-1"), store.job_of_token("alice", "nope"), store.next_job_id()))
    started = job(1, JobState.RUNNING, start_time=1010.0, node_names=["n1", "n2"], processors=[0, 1],
                  launched_to={"n1": "a"}, cpu_ns=1 << 40, max_rss=1 << 33,
                  steps={0: Step(0, [0, 1], {1}, None, 5000, 29500),
                         1: Step(1, [1], {0}, StepSpec(argv=["hostname"], env={"A": "1"}), cpu_ns=5, max_rss=7)},
                  preemptions=[Preemption(by_job=7, start=1011.0, end=1012.5)])
    store.save(started)
    ended = job(2, JobState.COMPLETED, start_time=1020.0, end_time=1030.0, exit_code=0, ran_s=9.5)
    store.closed(ended, Account("alice", 0.5, 100.0, Use(19.0, 2.5, 1e9)))
    store.save_node_marks({"n3": NodeMark(NodeState.DRAINING, NodeReason(text="fan", user="root", time=5.0)),
                           "n4": NodeMark(NodeState.DOWN, NodeReason(text="psu", user="root", time=6.0))})
    store.save_node_marks({"n4": None})
    store.save_limits("alice", UserLimits(max_jobs=3))
    store.save_limits("bob", UserLimits(partition="debug", max_memory=1 << 34))
    store.save_limits("bob", UserLimits(partition="debug"))  # none left: removed
    store.save_reservation("maint", ReservationInfo(name="maint", nodes=["n1"], start=10.0, end=20.0, jobs=[9]))
    store.record_action(7.0, "root", "admin node drain n3 --reason 'fan'", "done", "t-1")
    store.record_action(8.0, "alice", "hold 3", "refused: nope", None)
    store.commit()
    first = store.get(1)
    answers += [[each.info() for each in store.active()], [each.info() for each in store.finished(10)],
                [each.info() for each in store.ended_since(1025.0, 0, 10)], first.info() if first else None,
                store.accounts(), store.node_marks(), store.user_limits(), store.reservations(),
                store.action_of_token("root", "t-1"), store.admin_log(0, 10), store.pending,
                first.steps if first else None]
    return answers


@pytest.mark.live
def test_the_store_on_postgresql_answers_as_the_store_on_sqlite(tmp_path, database):
    sqlite, postgres = SqliteStore(tmp_path / "jobs.db"), PostgresStore(database)
    assert exercise(postgres) == exercise(sqlite)
    again = PostgresStore(database)  # what was committed is there for the next master
    assert [each.job_id for each in again.active()] == [1, 3] and again.next_job_id() == 4
    for store in (sqlite, postgres, again):
        store.close()


@pytest.mark.live
def test_a_failed_write_is_rolled_back_alone_and_the_commit_takes_the_others(database):
    store = PostgresStore(database)
    store.submitted([job(1)], "token-1")
    with pytest.raises(StoreWriteError):
        store.submitted([job(2)], "token-1")  # the same token again: the write fails whole, job 2 with it
    store.save(job(1, JobState.RUNNING, start_time=5.0))
    store.commit()
    reopened = PostgresStore(database)
    assert [(each.job_id, each.state) for each in reopened.active()] == [(1, JobState.RUNNING)]
    assert reopened.job_of_token("alice", "token-1") == 1
    store.close()
    reopened.close()


@pytest.mark.live
def test_a_master_runs_its_jobs_and_restarts_on_postgresql(database, clock):
    core = driven_master(SETTINGS, ENDPOINTS, PostgresStore(database), clock)
    for node in ("n1", "n2", "n3", "n4"):
        hello(core, node)
    jobs = [core.clients.submit(Submit(spec=JobSpec(name="j", user="alice", tasks=2, argv=["true"]))).job_id
            for _ in range(3)]
    first = core.clients.query_jobs(JobQuery(job_ids=[jobs[0]])).jobs[0]
    for rank, node in enumerate(first.node_names):
        core.task_ended(TaskExit(node=node, job_id=jobs[0], rank=rank, returncode=0))
    clock.now += 0.1
    for node in ("n1", "n2", "n3", "n4"):
        core.node_reports.heartbeat(Heartbeat(node=node))
    core.tick()
    core.store.close()
    restarted = driven_master(SETTINGS, ENDPOINTS, PostgresStore(database), clock)
    states = {each.job_id: each.state for each in restarted.clients.query_jobs(
        JobQuery(job_ids=jobs, include_finished=True)).jobs}
    assert states[jobs[0]] is JobState.COMPLETED and {states[jobs[1]], states[jobs[2]]} <= {
        JobState.RUNNING, JobState.PENDING}
    restarted.store.close()


@pytest.mark.live
def test_a_postgresql_store_that_cannot_be_used_is_refused_with_one_line(tmp_path, database):
    with pytest.raises(StoreError) as unreachable:
        PostgresStore(f"postgresql://gangsched:secret@/postgres?host={tmp_path}&port=5432")
    assert "cannot be reached" in str(unreachable.value) and "secret" not in str(unreachable.value)
    assert "\n" not in str(unreachable.value)
    PostgresStore(database).close()
    with psycopg.connect(database, autocommit=True) as connection:
        connection.execute("UPDATE gangsched_schema SET version = 99")
    with pytest.raises(StoreError, match=f"has schema version 99, this gangsched reads {SCHEMA_VERSION}: give"):
        PostgresStore(database)
    with psycopg.connect(database, autocommit=True) as connection:  # as version 12 made it
        connection.execute("UPDATE gangsched_schema SET version = 12")
        jobs_as_version_15(lambda statement, *parameters: connection.execute(statement.replace("?", "%s"), *parameters))
        running_jobs_of_version_15(lambda statement, *parameters: connection.execute(statement.replace("?", "%s"),
                                                                                     *parameters))
        connection.execute("ALTER TABLE jobs DROP COLUMN live_ranks")
        connection.execute("DROP TABLE users")
        connection.execute('CREATE TABLE users ("user" TEXT PRIMARY KEY, political_priority DOUBLE PRECISION NOT NULL,'
                           " quota_node_s DOUBLE PRECISION, used_node_s DOUBLE PRECISION NOT NULL)")
        connection.execute("INSERT INTO users VALUES ('alice', 0.5, 100.0, 42.0)")
    PostgresStore(database).close()  # migrated
    with psycopg.connect(database, autocommit=True) as connection:
        assert connection.execute("SELECT version FROM gangsched_schema").fetchone() == (SCHEMA_VERSION,)
        connection.execute("SELECT steps FROM jobs")
    migrated = PostgresStore(database)
    assert migrated.accounts() == [Account("alice", 0.5, 100.0, Use(processor_s=42.0))]
    one = migrated.get(1)  # a store before version 13: every rank of its one launch, its step 0, is expected
    assert one is not None and one.live_tasks() == {(0, 0), (0, 1)}
    assert (one.steps[0].barrier_port, one.steps[0].rendezvous_port) == (5000, 29500)
    migrated.close()


@pytest.mark.live
def test_a_local_cluster_on_a_postgresql_store_makes_every_job_once_through_a_master_kill(start_cluster, database):
    from gangsched.bench.restarts import run_restart

    cluster = start_cluster(nodes=2, store=database)
    result = run_restart(cluster.local, submissions=60, clients=4)
    assert (result.accepted, result.completed, result.wrongly_failed, result.lost, result.duplicates) == \
        (60, 60, 0, 0, 0), result
    with psycopg.connect(database) as connection:  # the jobs are in PostgreSQL, not in a file of the master's
        assert connection.execute("SELECT COUNT(*) FROM jobs WHERE state = 'completed'").fetchone() == (60,)
    assert not (cluster.home / "master" / "jobs.db").exists()
