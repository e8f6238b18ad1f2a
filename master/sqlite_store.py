"""The master's store in SQLite (WAL, synchronous FULL), the embedded engine for one host
(master/store.py is the interface the master uses).

Each write is one transaction, fsync'd once; an error of SQLite's becomes
``StoreWriteError`` and the transaction is rolled back whole.
"""

import json
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from gangsched.master.accounts import Account
from gangsched.master.job_record import Job
from gangsched.master.stats import STEP_BOUNDS_S, Stopwatch, Timings
from gangsched.master.store import StoreError, StoreWriteError
from gangsched.protocol.records import JobSpec, JobState

_SCHEMA = """
CREATE TABLE IF NOT EXISTS jobs (
    job_id INTEGER PRIMARY KEY,
    spec TEXT NOT NULL,
    state TEXT NOT NULL,
    reason TEXT NOT NULL,
    submit_time REAL NOT NULL,
    start_time REAL,
    end_time REAL,
    node_names TEXT NOT NULL,
    processors TEXT NOT NULL,
    exit_code INTEGER,
    requeues INTEGER NOT NULL,
    barrier_port INTEGER,
    rendezvous_port INTEGER,
    barriers INTEGER NOT NULL,
    cpu_ns INTEGER NOT NULL,
    ran_s REAL NOT NULL,
    migration_s TEXT NOT NULL,
    max_rss INTEGER
);
-- a client's token for each submission: a retry after a lost reply finds the job it made
CREATE TABLE IF NOT EXISTS submissions (
    user TEXT NOT NULL,
    token TEXT NOT NULL,
    job_id INTEGER NOT NULL,
    PRIMARY KEY (user, token)
);
CREATE TABLE IF NOT EXISTS users (
    user TEXT PRIMARY KEY,
    political_priority REAL NOT NULL,
    quota_node_s REAL,
    used_node_s REAL NOT NULL
);
"""
_COLUMNS = (
    "job_id, spec, state, reason, submit_time, start_time, end_time,"
    " node_names, processors, exit_code, requeues, barrier_port, rendezvous_port, barriers, cpu_ns, ran_s,"
    " migration_s, max_rss"
)
_ACTIVE = (JobState.PENDING.value, JobState.RUNNING.value)
SCHEMA_VERSION = 5


class SqliteStore:
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # jobs name users, commands, paths
        self._db = sqlite3.connect(path, isolation_level=None)
        self.write_time = Timings(STEP_BOUNDS_S)
        self._db.execute("PRAGMA journal_mode=WAL")
        self._db.execute("PRAGMA synchronous=FULL")
        (version,) = self._db.execute("PRAGMA user_version").fetchone()
        (tables,) = self._db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        if tables == 0:
            self._db.executescript(_SCHEMA)
            self._db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
        elif version != SCHEMA_VERSION:
            self._db.close()
            raise StoreError(
                f"the job store {path} has schema version {version}, this gangsched reads "
                f"{SCHEMA_VERSION}: move it away or give another --state-dir"
            )

    def next_job_id(self) -> int:
        (highest,) = self._db.execute("SELECT COALESCE(MAX(job_id), 0) FROM jobs").fetchone()
        return int(highest) + 1

    def submitted(self, jobs: list[Job], token: str | None) -> None:
        """New jobs (one, or an array's) and the client's token for the first: all or none (one sync)."""
        with self._transaction():
            for job in jobs:
                self._write(job)
            if token is not None:
                self._db.execute("INSERT INTO submissions (user, token, job_id) VALUES (?, ?, ?)",
                                 (jobs[0].spec.user, token, jobs[0].job_id))

    def closed(self, job: Job, account: Account | None) -> None:
        """A job's end (or its requeue) and its user's use: both or neither (one transaction;
        master/closing.py)."""
        with self._transaction():
            self._write(job)
            if account is not None:
                self._write_account(account)

    def job_of_token(self, user: str, token: str) -> int | None:
        row = self._db.execute("SELECT job_id FROM submissions WHERE user = ? AND token = ?", (user, token)).fetchone()
        return None if row is None else int(row[0])

    def save(self, job: Job) -> None:
        with self._transaction():
            self._write(job)

    def _write(self, job: Job) -> None:
        self._db.execute(
            f"INSERT OR REPLACE INTO jobs ({_COLUMNS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
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
                job.barrier_port,
                job.rendezvous_port,
                job.barriers,
                job.cpu_ns,
                job.ran_s,
                json.dumps(job.migration_s),
                job.max_rss,
            ),
        )

    def active(self) -> list[Job]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM jobs WHERE state IN (?, ?) ORDER BY job_id", _ACTIVE
        )
        return [_job(row) for row in rows]

    def finished(self, limit: int) -> list[Job]:
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM jobs WHERE state NOT IN (?, ?) ORDER BY job_id DESC LIMIT ?",
            (*_ACTIVE, limit),
        )
        return [_job(row) for row in reversed(list(rows))]

    def ended_since(self, since: float, after_id: int, limit: int) -> list[Job]:
        """The first ``limit`` finished jobs above ``after_id`` that ended at ``since`` or later."""
        rows = self._db.execute(
            f"SELECT {_COLUMNS} FROM jobs WHERE state NOT IN (?, ?) AND end_time >= ? AND job_id > ?"
            " ORDER BY job_id LIMIT ?",
            (*_ACTIVE, since, after_id, limit),
        )
        return [_job(row) for row in rows]

    def get(self, job_id: int) -> Job | None:
        row = self._db.execute(f"SELECT {_COLUMNS} FROM jobs WHERE job_id = ?", (job_id,)).fetchone()
        return _job(row) if row else None

    def save_account(self, account: Account) -> None:
        with self._transaction():
            self._write_account(account)

    @contextmanager
    def _transaction(self) -> Iterator[None]:
        """One transaction, committed (and synced) once, or rolled back whole as ``StoreWriteError``."""
        try:
            with Stopwatch(self.write_time), self._db:
                self._db.execute("BEGIN")
                yield
        except sqlite3.Error as error:
            raise StoreWriteError(str(error)) from error

    def _write_account(self, account: Account) -> None:
        self._db.execute(
            "INSERT OR REPLACE INTO users (user, political_priority, quota_node_s, used_node_s) VALUES (?,?,?,?)",
            (account.user, account.political_priority, account.quota_node_s, account.used_node_s),
        )

    def accounts(self) -> list[Account]:
        rows = self._db.execute("SELECT user, political_priority, quota_node_s, used_node_s FROM users ORDER BY user")
        return [Account(*row) for row in rows]

    def close(self) -> None:
        self._db.close()


def _job(row: tuple[Any, ...]) -> Job:
    (job_id, spec, state, reason, submit, start, end, nodes, processors, exit_code, requeues, port,
     rendezvous_port, barriers, cpu_ns, ran_s, migration_s, max_rss) = row
    return Job(
        job_id=job_id,
        spec=JobSpec.model_validate_json(spec),
        state=JobState(state),
        reason=reason,
        submit_time=submit,
        start_time=start,
        end_time=end,
        node_names=json.loads(nodes),
        processors=json.loads(processors),
        exit_code=exit_code,
        requeues=requeues,
        barrier_port=port,
        rendezvous_port=rendezvous_port,
        barriers=barriers,
        cpu_ns=cpu_ns,
        ran_s=ran_s,
        migration_s=json.loads(migration_s),
        max_rss=max_rss,
    )
