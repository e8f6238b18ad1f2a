"""The store in SQLite (WAL, synchronous FULL), the embedded engine for one host: a file in the
master's state folder, each commit fsync'd (master/sql_store.py does the rest)."""

import contextlib
import sqlite3
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from gangsched.master.sql_schema import (
    LIVE_RANKS_COLUMN,
    SCHEMA_VERSION,
    STEP_COLUMNS_DROPPED,
    STEPS_COLUMN,
    USE_COLUMNS,
    statements,
)
from gangsched.master.sql_store import SqlStore
from gangsched.master.store import StoreError

# what a store of an earlier version needs to be this one's (all its steps one transaction)
_MIGRATIONS = {5: ["ALTER TABLE jobs ADD COLUMN launched_to TEXT NOT NULL DEFAULT '{}'"],
               6: ["CREATE INDEX IF NOT EXISTS jobs_by_state ON jobs (state)"],
               7: ["ALTER TABLE jobs ADD COLUMN preemptions TEXT NOT NULL DEFAULT '[]'"],
               8: ["ALTER TABLE jobs ADD COLUMN hold TEXT", *statements("node_marks"),
                   # as version 9 made it: 12 added its tokens
                   'CREATE TABLE admin_log (number INTEGER PRIMARY KEY, time REAL NOT NULL, "user" TEXT NOT NULL,'
                   " command TEXT NOT NULL, result TEXT NOT NULL)"],
               9: statements("user_limits"),
               10: statements("reservations"),
               11: ["ALTER TABLE admin_log ADD COLUMN token TEXT",
                    'CREATE INDEX IF NOT EXISTS admin_log_by_token ON admin_log ("user", token)'],
               12: [LIVE_RANKS_COLUMN],
               13: statements("quarantined_jobs"),
               14: USE_COLUMNS,
               15: [STEPS_COLUMN,
                    "UPDATE jobs SET steps = json_array(json_object('id', 0, 'live', json(live_ranks), 'ports',"
                    " json_array(barrier_port, rendezvous_port))) WHERE node_names <> '[]'",
                    *STEP_COLUMNS_DROPPED]}


class _Sqlite:
    def __init__(self, path: Path) -> None:
        self.errors: tuple[type[Exception], ...] = (sqlite3.Error,)
        self._connection = sqlite3.connect(path, isolation_level=None)  # transactions by statements

    def execute(self, statement: str, parameters: Iterable[Any] = ()) -> sqlite3.Cursor:
        return self._connection.execute(statement, tuple(parameters))

    def batch(self) -> contextlib.nullcontext[None]:
        return contextlib.nullcontext()  # in the process: nothing to gain by sending statements together

    @property
    def in_transaction(self) -> bool:
        return self._connection.in_transaction

    def close(self) -> None:
        self._connection.close()


class SqliteStore(SqlStore):
    def __init__(self, path: Path) -> None:
        path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)  # jobs name users, commands, paths
        db = _Sqlite(path)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")
        (version,) = db.execute("PRAGMA user_version").fetchone()
        (tables,) = db.execute("SELECT COUNT(*) FROM sqlite_master").fetchone()
        if tables == 0:
            db.execute("BEGIN")
            for statement in statements():
                db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")
        elif version in _MIGRATIONS:
            db.execute("BEGIN")
            for step in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step]:
                    db.execute(statement)
            db.execute(f"PRAGMA user_version={SCHEMA_VERSION}")
            db.execute("COMMIT")
        elif version != SCHEMA_VERSION:
            db.close()
            raise StoreError(
                f"the job store {path} has schema version {version}, this gangsched reads "
                f"{SCHEMA_VERSION}: move it away or give another --state-dir"
            )
        super().__init__(db)
