"""The master's store over SQL, as both engines hold it (master/store.py is the interface the master
uses; master/sqlite_store.py and master/postgres_store.py open their engine and its schema).

Group commit: the writes of one turn of the master's loop go into one
transaction, made durable once by ``commit``. Each write is a savepoint in it:
one whose statements fail is rolled back alone and raises ``StoreWriteError``.
The statements of every write since the last commit are kept until a commit
takes them; a commit that fails rolls the transaction back whole and runs
them all again, in order, in a new one, so what the master reads is still
what it wrote, and the next ``commit`` tries again. Where even that fails, the
writes are only kept until a commit can run them all. Nothing is ever half
written.
"""

import json
import logging
import time
from collections.abc import Iterable, Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any, Protocol

from gangsched.master.accounts import Account, Use
from gangsched.master.job_record import Job
from gangsched.master.job_steps import Step, task_slots
from gangsched.master.nodes import NodeMark
from gangsched.master.sql_schema import (
    ACCOUNT_UPSERT,
    ACTION_COLUMNS,
    ACTION_INSERT,
    JOB_COLUMNS,
    JOB_UPSERT,
    LIMITS_UPSERT,
    MARK_UPSERT,
    QUARANTINE_INSERT,
    RESERVATION_UPSERT,
    TOKEN_INSERT,
)
from gangsched.master.stats import STEP_BOUNDS_S, Stopwatch, Timings
from gangsched.master.store import RecordRefused, StoreWriteError
from gangsched.protocol.admin_messages import AdminAction
from gangsched.protocol.records import Hold, JobSpec, JobState, NodeReason, NodeState, Preemption, StepSpec, UserLimits
from gangsched.protocol.reservation_messages import ReservationInfo

log = logging.getLogger("gangsched.master")

_ACTIVE = (JobState.PENDING.value, JobState.RUNNING.value)


class Rows(Protocol):
    def fetchone(self) -> Any: ...

    def __iter__(self) -> Iterator[Any]: ...


class Engine(Protocol):
    """A connection to one engine, in the terms the store needs: statements with ``?`` for parameters,
    transactions begun, committed and rolled back by statements."""

    errors: tuple[type[Exception], ...]  # what its failures raise

    def execute(self, statement: str, parameters: Iterable[Any] = ()) -> Rows: ...

    def batch(self) -> AbstractContextManager[object]:
        """Statements sent together, their failure raised at the end (or at once, where each is sent alone)."""

    @property
    def in_transaction(self) -> bool: ...

    def close(self) -> None: ...


class SqlStore:
    def __init__(self, engine: Engine) -> None:
        """``engine``: open, its schema this gangsched's."""
        self._db = engine
        self.write_time = Timings(STEP_BOUNDS_S)
        self._unwritten: list[tuple[str, tuple[Any, ...]]] = []  # statements since the last commit, in order
        self._unit: list[tuple[str, tuple[Any, ...]]] = []  # those of the write under way
        self._replay = False  # the writes since the last commit could not be run again: kept, not run
        (highest,) = self._db.execute(  # a quarantined job's number is not given again
            "SELECT MAX(highest) FROM (SELECT COALESCE(MAX(job_id), 0) AS highest FROM jobs"
            " UNION ALL SELECT COALESCE(MAX(job_id), 0) FROM quarantined_jobs) AS ids").fetchone()
        self._next_job_id = int(highest) + 1  # held here: a submission not yet committed has its numbers
        (last,) = self._db.execute("SELECT COALESCE(MAX(number), 0) FROM admin_log").fetchone()
        self._next_action = int(last) + 1

    def next_job_id(self) -> int:
        return self._next_job_id

    @property
    def pending(self) -> bool:
        return bool(self._unwritten)

    def commit(self) -> None:
        """Make every write since the last commit durable, in one transaction; ``StoreWriteError`` (and all
        of them kept for the next commit) if it cannot."""
        if not self._unwritten:
            return
        try:
            with Stopwatch(self.write_time):
                if self._replay:
                    self._run_again()
                self._db.execute("COMMIT")
        except self._db.errors as error:
            if self._db.in_transaction:
                self._db.execute("ROLLBACK")
            try:
                self._run_again()  # uncommitted, as before the commit
            except self._db.errors:
                if self._db.in_transaction:
                    self._db.execute("ROLLBACK")
                self._replay = True
            raise StoreWriteError(str(error)) from error
        self._unwritten.clear()

    def _run_again(self) -> None:
        """Every write since the last commit, in a new transaction."""
        self._db.execute("BEGIN")
        for statement, parameters in self._unwritten:
            self._db.execute(statement, parameters)
        self._replay = False

    def submitted(self, jobs: list[Job], token: str | None) -> None:
        """New jobs (one, or an array's) and the client's token for the first: all or none."""
        with self._transaction():
            for job in jobs:
                self._write(job)
            if token is not None:
                self._execute(TOKEN_INSERT,
                              (jobs[0].spec.user, token, jobs[0].job_id))
        self._next_job_id = max(self._next_job_id, jobs[-1].job_id + 1)

    def closed(self, job: Job, account: Account | None) -> None:
        """A job's end (or its requeue) and its user's use: both or neither (master/closing.py)."""
        with self._transaction():
            self._write(job)
            if account is not None:
                self._write_account(account)

    def job_of_token(self, user: str, token: str) -> int | None:
        # a submission not yet committed is found too: in the open transaction, or among the kept writes
        for statement, parameters in reversed(self._unwritten) if self._replay else ():
            if statement == TOKEN_INSERT and parameters[:2] == (user, token):
                return int(parameters[2])
        row = self._db.execute('SELECT job_id FROM submissions WHERE "user" = ? AND token = ?',
                               (user, token)).fetchone()
        return None if row is None else int(row[0])

    def save(self, *jobs: Job) -> None:
        with self._transaction():
            for job in jobs:
                self._write(job)

    def _write(self, job: Job) -> None:
        self._execute(
            JOB_UPSERT,
            (
                job.job_id,
                job.spec.model_dump_json(),
                job.state.value,
                job.shown_reason(),
                job.submit_time,
                job.start_time,
                job.end_time,
                json.dumps(job.node_names),
                json.dumps(job.processors),
                job.exit_code,
                job.requeues,
                job.barriers,
                job.cpu_ns,
                job.ran_s,
                json.dumps(job.migration_s),
                job.max_rss,
                json.dumps(job.launched_to),
                json.dumps([preemption.model_dump() for preemption in job.preemptions]),
                None if job.hold is None else job.hold.value,
                _steps_text(job),
            ),
        )

    def active(self) -> list[Job]:
        rows = self._db.execute(
            f"SELECT {JOB_COLUMNS} FROM jobs WHERE state IN (?, ?) ORDER BY job_id", _ACTIVE
        )
        return self._jobs(rows)

    def finished(self, limit: int) -> list[Job]:
        rows = self._db.execute(
            f"SELECT {JOB_COLUMNS} FROM jobs WHERE state NOT IN (?, ?) ORDER BY job_id DESC LIMIT ?",
            (*_ACTIVE, limit),
        )
        return self._jobs(reversed(list(rows)))

    def ended_since(self, since: float, after_id: int, limit: int) -> list[Job]:
        """The first ``limit`` finished jobs above ``after_id`` that ended at ``since`` or later."""
        rows = self._db.execute(
            f"SELECT {JOB_COLUMNS} FROM jobs WHERE state NOT IN (?, ?) AND end_time >= ? AND job_id > ?"
            " ORDER BY job_id LIMIT ?",
            (*_ACTIVE, since, after_id, limit),
        )
        return self._jobs(rows)

    def get(self, job_id: int) -> Job | None:
        row = self._db.execute(f"SELECT {JOB_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        found = self._jobs([row] if row else [])
        return found[0] if found else None

    def _jobs(self, rows: Iterable[tuple[Any, ...]]) -> list[Job]:
        """The jobs of ``rows``; a record this gangsched would refuse is quarantined (moved to
        quarantined_jobs with why, written with the turn's writes) and left out."""
        jobs = []
        for row in list(rows):
            try:
                jobs.append(_job(row))
            except (ValueError, TypeError, KeyError) as error:  # pydantic's ValidationError is a ValueError
                self._quarantine(row, error)
        return jobs

    def _quarantine(self, row: tuple[Any, ...], error: Exception) -> None:
        reason = " ".join(f"{type(error).__name__}: {error}".split())[:500]
        log.error("job %s's stored record is not one this gangsched takes (%s): quarantined in quarantined_jobs, "
                  "the master goes on without it", row[0], reason)
        record = json.dumps(dict(zip([name.strip() for name in JOB_COLUMNS.split(",")], row, strict=True)))
        try:
            with self._transaction():
                self._execute(QUARANTINE_INSERT, (row[0], record, reason, time.time()))
                self._execute("DELETE FROM jobs WHERE job_id = ?", (row[0],))
        except StoreWriteError as failed:  # left where it is: the next read finds it again
            log.error("job %s's record could not be quarantined (%s)", row[0], failed)

    def quarantined(self) -> list[tuple[int, str]]:
        """The records quarantined so far: each job's id and why."""
        rows = self._db.execute("SELECT job_id, reason FROM quarantined_jobs ORDER BY job_id")
        return [(int(job_id), str(reason)) for job_id, reason in rows]

    def save_account(self, account: Account) -> None:
        with self._transaction():
            self._write_account(account)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One write: a savepoint of the open transaction, kept whole or rolled back whole as
        ``StoreWriteError``; only kept, for the next commit, where the writes could not be run again."""
        self._unit = []
        try:
            if self._replay:
                yield
            else:
                if not self._db.in_transaction:
                    self._db.execute("BEGIN")
                try:
                    with self._db.batch():  # the savepoint, the write's statements and the release sent at once
                        self._db.execute("SAVEPOINT write")
                        yield
                        self._db.execute("RELEASE write")
                except BaseException:
                    self._db.execute("ROLLBACK TO write")
                    self._db.execute("RELEASE write")
                    raise
        except self._db.errors as error:
            raise StoreWriteError(str(error)) from error
        except (OverflowError, ValueError, TypeError) as error:  # what binding a value the engine cannot hold raises
            raise RecordRefused(f"{type(error).__name__}: {error}") from error
        self._unwritten += self._unit

    def _execute(self, statement: str, parameters: tuple[Any, ...]) -> None:
        self._unit.append((statement, parameters))
        if not self._replay:
            self._db.execute(statement, parameters)

    def _write_account(self, account: Account) -> None:
        self._execute(
            ACCOUNT_UPSERT,
            (account.user, account.political_priority, account.quota_processor_s, account.used.processor_s,
             account.used.cpu_s, account.used.memory_byte_s),
        )

    def accounts(self) -> list[Account]:
        rows = self._db.execute('SELECT "user", political_priority, quota_processor_s, used_processor_s, used_cpu_s,'
                                ' used_memory_byte_s FROM users ORDER BY "user"')
        return [Account(user, priority, quota, Use(*used)) for user, priority, quota, *used in rows]

    def save_node_marks(self, marks: dict[str, NodeMark | None]) -> None:
        with self._transaction():
            for node, mark in marks.items():
                if mark is None:
                    self._execute("DELETE FROM node_marks WHERE node = ?", (node,))
                    continue
                reason = mark.reason
                self._execute(MARK_UPSERT, (node, mark.state.value, reason.text, reason.user, reason.time))

    def node_marks(self) -> dict[str, NodeMark]:
        rows = self._db.execute('SELECT node, state, reason, "user", time FROM node_marks ORDER BY node')
        return {node: NodeMark(NodeState(state), NodeReason(text=text, user=user, time=time))
                for node, state, text, user, time in rows}

    def save_limits(self, user: str, limits: UserLimits) -> None:
        with self._transaction():
            partition = limits.partition or ""
            if limits.model_dump(exclude={"partition"}, exclude_none=True):
                self._execute(LIMITS_UPSERT, (user, partition, limits.model_dump_json()))
            else:
                self._execute('DELETE FROM user_limits WHERE "user" = ? AND partition = ?', (user, partition))

    def user_limits(self) -> list[tuple[str, UserLimits]]:
        rows = self._db.execute('SELECT "user", limits FROM user_limits ORDER BY "user", partition')
        return [(user, UserLimits.model_validate_json(limits)) for user, limits in rows]

    def save_reservation(self, name: str, reservation: ReservationInfo | None) -> None:
        with self._transaction():
            if reservation is None:
                self._execute("DELETE FROM reservations WHERE name = ?", (name,))
            else:
                self._execute(RESERVATION_UPSERT, (name, reservation.model_dump_json(exclude={"jobs"})))

    def reservations(self) -> list[ReservationInfo]:
        rows = self._db.execute("SELECT reservation FROM reservations ORDER BY name")
        return [ReservationInfo.model_validate_json(reservation) for (reservation,) in rows]

    def record_action(self, time: float, user: str, command: str, result: str,
                      token: str | None = None) -> AdminAction:
        action = AdminAction(number=self._next_action, time=time, user=user, command=command, result=result,
                             token=token)
        with self._transaction():
            self._execute(ACTION_INSERT, (action.number, time, user, command, result, token))
        self._next_action += 1
        return action

    def action_of_token(self, user: str, token: str) -> AdminAction | None:
        # a command not yet committed is found too: in the open transaction, or among the kept writes
        for statement, parameters in reversed(self._unwritten) if self._replay else ():
            if statement == ACTION_INSERT and (parameters[2], parameters[5]) == (user, token):
                return _action(parameters)
        row = self._db.execute(f'SELECT {ACTION_COLUMNS} FROM admin_log WHERE "user" = ? AND token = ?',
                               (user, token)).fetchone()
        return None if row is None else _action(row)

    def admin_log(self, after: int, limit: int) -> list[AdminAction]:
        rows = self._db.execute(f"SELECT {ACTION_COLUMNS} FROM admin_log WHERE number > ? ORDER BY number LIMIT ?",
                                (after, limit))
        return [_action(row) for row in rows]

    def close(self) -> None:
        self._db.close()


def _job(row: tuple[Any, ...]) -> Job:
    (job_id, spec, state, reason, submit, start, end, nodes, processors, exit_code, requeues, barriers, cpu_ns, ran_s,
     migration_s, max_rss, launched_to, preemptions, hold, steps) = row
    node_names, job_spec = json.loads(nodes), JobSpec.model_validate_json(spec)
    return Job(
        job_id=job_id,
        spec=job_spec,
        state=JobState(state),
        reason=reason,
        submit_time=submit,
        start_time=start,
        end_time=end,
        node_names=node_names,
        processors=json.loads(processors),
        exit_code=exit_code,
        requeues=requeues,
        barriers=barriers,
        cpu_ns=cpu_ns,
        ran_s=ran_s,
        migration_s=json.loads(migration_s),
        max_rss=max_rss,
        launched_to=json.loads(launched_to),
        preemptions=[Preemption.model_validate(each) for each in json.loads(preemptions)],
        hold=None if hold is None else Hold(hold),
        steps=_steps(steps, task_slots(job_spec, len(node_names))),
    )


def _steps_text(job: Job) -> str:
    """A job's steps as its row holds them (``slots`` null: every task of the allocation, as step 0's)."""
    every = task_slots(job.spec, len(job.node_names))
    return json.dumps([{
        "id": step.step_id, "slots": None if step.slots == every else step.slots, "live": sorted(step.live_ranks),
        "ports": [step.barrier_port, step.rendezvous_port], "exit": step.exit_code, "cpu_ns": step.cpu_ns,
        "max_rss": step.max_rss, "spec": None if step.spec is None else step.spec.model_dump(mode="json"),
        "start": step.start_time, "end": step.end_time, "state": None if step.state is None else step.state.value,
        "failure": None if step.failure is None else [step.failure[0].value, *step.failure[1:]],
        "failed": {str(rank): code for rank, code in step.failed_tasks.items()},
    } for step in job.steps.values()])


def _steps(text: str, every: list[int]) -> dict[int, Step]:
    """A job's steps from its row, ``every`` where its allocation's tasks begin (a step's ``slots`` null: on
    all of them); a step whose ``live`` is null (migrated from a store before version 13) has every rank left."""
    found, starts = {}, set(every)
    for each in json.loads(text):
        slots = every if each.get("slots") is None else each["slots"]
        if any(slot not in starts for slot in slots):
            raise ValueError(f"step {each['id']} runs outside the job's {len(every)} tasks: {slots}")
        live = each.get("live")
        barrier_port, rendezvous_port = each.get("ports") or (None, None)
        spec, failure = each.get("spec"), each.get("failure")
        found[each["id"]] = Step(each["id"], slots, set(range(len(slots))) if live is None else set(live),
                                 None if spec is None else StepSpec.model_validate(spec), barrier_port,
                                 rendezvous_port, each.get("exit"), each.get("cpu_ns", 0), each.get("max_rss", 0),
                                 each.get("start"), each.get("end"),
                                 None if each.get("state") is None else JobState(each["state"]),
                                 None if failure is None else (JobState(failure[0]), failure[1], failure[2]),
                                 {int(rank): code for rank, code in (each.get("failed") or {}).items()})
    return found


def _action(row: tuple[Any, ...]) -> AdminAction:
    number, time, user, command, result, token = row
    return AdminAction(number=number, time=time, user=user, command=command, result=result, token=token)
