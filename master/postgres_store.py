"""The store in PostgreSQL (psycopg 3), for masters on several hosts that share it: the same tables,
transactions and group commit as SQLite's (master/sql_store.py), its schema version in a table of
its own. ``--store postgresql://USER@HOST/DATABASE`` chooses it."""

import functools
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import Any

from gangsched.master.sql_schema import (
    LIVE_RANKS_COLUMN,
    SCHEMA_VERSION,
    STEP_COLUMNS_DROPPED,
    STEPS_COLUMN,
    USE_COLUMNS,
    statements,
)
from gangsched.master.sql_store import Rows, SqlStore
from gangsched.master.store import StoreError

# the store's sessions go by this name: a new leader ends those of the leader before (master/leadership.py)
APPLICATION_NAME = "gangsched store"
_VERSION_TABLE = "CREATE TABLE gangsched_schema (version INTEGER NOT NULL)"
# what a store of an earlier version needs to be this one's (all its steps one transaction)
_MIGRATIONS: dict[int, list[str]] = {
    12: [LIVE_RANKS_COLUMN], 13: statements("quarantined_jobs"), 14: USE_COLUMNS,
    15: [STEPS_COLUMN,
         "UPDATE jobs SET steps = json_build_array(json_build_object('id', 0, 'live', live_ranks::json, 'ports',"
         " json_build_array(barrier_port, rendezvous_port)))::text WHERE node_names <> '[]'",
         *STEP_COLUMNS_DROPPED]}


class _Postgres:
    def __init__(self, url: str) -> None:
        import psycopg  # only where PostgreSQL is chosen: SQLite's masters never load it

        self.errors: tuple[type[Exception], ...] = (psycopg.Error,)
        self._idle = psycopg.pq.TransactionStatus.IDLE
        try:
            # transactions by statements, as SQLite's: BEGIN, SAVEPOINT, COMMIT
            self._connection = psycopg.connect(url, autocommit=True, connect_timeout=10,
                                               application_name=APPLICATION_NAME,
                                               # a link cut mid-write fails it in seconds, not TCP's minutes
                                               tcp_user_timeout=5000, keepalives_idle=2, keepalives_interval=1,
                                               keepalives_count=3)
        except psycopg.Error as error:
            raise StoreError(f"the job store {_without_password(url)} cannot be reached: "
                             f"{str(error).strip().splitlines()[0]}") from None

    def execute(self, statement: str, parameters: Iterable[Any] = ()) -> Rows:
        given = tuple(parameters)
        return self._connection.execute(_in_psycopg_terms(statement), given or None)

    def batch(self) -> AbstractContextManager[object]:
        return self._connection.pipeline()  # one round trip to the server for a write, not one a statement

    @property
    def in_transaction(self) -> bool:
        return self._connection.info.transaction_status != self._idle

    def close(self) -> None:
        self._connection.close()


class PostgresStore(SqlStore):
    def __init__(self, url: str) -> None:
        db = _Postgres(url)
        (jobs,) = db.execute("SELECT to_regclass('jobs') IS NOT NULL").fetchone()
        if not jobs:
            db.execute("BEGIN")
            for statement in [*statements(), _VERSION_TABLE]:
                db.execute(statement)
            db.execute("INSERT INTO gangsched_schema (version) VALUES (?)", (SCHEMA_VERSION,))
            db.execute("COMMIT")
        (version,) = db.execute("SELECT version FROM gangsched_schema").fetchone()
        if version in _MIGRATIONS:
            db.execute("BEGIN")
            for step in range(version, SCHEMA_VERSION):
                for statement in _MIGRATIONS[step]:
                    db.execute(statement)
            db.execute("UPDATE gangsched_schema SET version = ?", (SCHEMA_VERSION,))
            db.execute("COMMIT")
        elif version != SCHEMA_VERSION:
            db.close()
            raise StoreError(f"the job store {_without_password(url)} has schema version {version}, this gangsched "
                             f"reads {SCHEMA_VERSION}: give another --store")
        super().__init__(db)


@functools.cache
def _in_psycopg_terms(statement: str) -> str:
    """The store's statements name their parameters ``?``; psycopg's ``%s`` (the store's are a few dozen)."""
    return statement.replace("?", "%s")


def _without_password(url: str) -> str:
    """The URL as it may be printed."""
    scheme, _, rest = url.partition("://")
    credentials, at, place = rest.rpartition("@")
    return url if not at else f"{scheme}://{credentials.split(':')[0]}@{place}"
