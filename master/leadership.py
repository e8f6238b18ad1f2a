"""Which of the masters that share a store leads, and the epoch of its lead (docs/architecture.md,
"Leadership").

With SQLite, one host's file, there is one master and it leads (``SoleLead``). With PostgreSQL any
number of masters share the store and one leads by a lease (``LeaseLead``): a row holds the
leader, the epoch of its lead and when the lease runs out on the database's clock; the leader
renews it every quantum, a standby takes it once it has run out. A lease rather than a
session-level advisory lock: a lock lasts as long as its session, and a leader that is stopped
(SIGSTOP) or cut off keeps its session open until TCP keepalive gives up (two hours by default),
while a lease runs out whatever its holder does.

Fencing: every lead has an epoch one higher than the last, stamped on every message to the
nodes, which obey only the newest they have seen; and a new leader ends the old leader's
sessions with the store before it reads it (``pg_terminate_backend``), so a transaction of a
leader that was stopped or cut off is rolled back and its store cannot write again. A leader
also judges its lease by its own monotonic clock, from before it asked for it, and sends
nothing once that has run out: a stopped leader, continued, sends nothing before it has
renewed, which it cannot, and it stands by.
"""

import logging
import math
import os
import socket
from enum import Enum
from typing import Any, Protocol

from gangsched.daemon.logs import ThrottledWarning
from gangsched.master.postgres_store import APPLICATION_NAME as STORE_APPLICATION
from gangsched.master.store import StoreError
from gangsched.protocol.leadership_messages import MasterInfo, MasterRole

log = logging.getLogger("gangsched.master")

_LEAD_APPLICATION = "gangsched lead"
_DOWN_AFTER_LEASES = 3  # a master not heard from for this many leases is listed down
_SCHEMA = [
    "SELECT pg_advisory_xact_lock(7070)",  # two masters starting at once make the tables once
    """CREATE TABLE IF NOT EXISTS gangsched_lead (
        only_row BOOLEAN PRIMARY KEY DEFAULT TRUE CHECK (only_row), epoch BIGINT NOT NULL,
        leader TEXT NOT NULL, expires TIMESTAMPTZ NOT NULL, hand_to TEXT)""",
    "INSERT INTO gangsched_lead (epoch, leader, expires) VALUES (0, '', '-infinity') ON CONFLICT DO NOTHING",
    """CREATE TABLE IF NOT EXISTS gangsched_masters (
        endpoint TEXT PRIMARY KEY, host TEXT NOT NULL, pid INTEGER NOT NULL, seen TIMESTAMPTZ NOT NULL)""",
]


class LeadError(Exception):
    """A request about the lead that cannot be done (no standby to hand it to, ...)."""


class Kept(Enum):
    LEADS = "leads"
    HANDS_OVER = "hands over"  # root asked for a takeover: hand the lead over after this quantum
    LOST = "lost"  # another leads, or the lease ran out unrenewed: stand by


class Lead(Protocol):
    epoch: int  # of this master's lead; 0 while it stands by

    @property
    def due(self) -> float:
        """When the lease is next to be renewed (monotonic seconds)."""
        ...

    def take(self, now: float) -> bool:
        """A standby's try, on the monotonic clock ``now``: True if it leads from now."""
        ...

    def keep(self, now: float) -> Kept:
        """The leader's, at each quantum boundary: its lease renewed when due."""
        ...

    def holds(self, now: float) -> bool:
        """Whether the lease is this master's at ``now`` by its own clock (nothing goes out otherwise)."""
        ...

    def hand_over(self) -> None:
        """Give the lead to the master a takeover named; this one stands by."""
        ...

    def leader(self) -> str | None:
        """The leader's endpoint as last seen; None: none leads."""
        ...

    def masters(self) -> list[MasterInfo]: ...

    def request_takeover(self, to: str | None) -> tuple[str, str | None, int]:
        """Ask that the lead move to ``to`` (None: this standby, or the freshest standby); the master that
        takes it, the one that leads until then, its epoch. LeadError if it cannot be."""
        ...

    def close(self) -> None:
        """Stopping: a leader's lease is given up at once, so a standby need not wait it out."""
        ...


class SoleLead:
    """SQLite: one master on one host, which always leads (at epoch 1)."""

    def __init__(self, endpoint: str) -> None:
        self.epoch = 0
        self._endpoint = endpoint

    @property
    def due(self) -> float:
        return math.inf

    def take(self, now: float) -> bool:
        self.epoch = 1
        return True

    def keep(self, now: float) -> Kept:
        return Kept.LEADS

    def holds(self, now: float) -> bool:
        return True

    def hand_over(self) -> None:
        raise LeadError("one master keeps its jobs in SQLite: there is no standby")

    def leader(self) -> str | None:
        return self._endpoint

    def masters(self) -> list[MasterInfo]:
        return [MasterInfo(endpoint=self._endpoint, host=socket.gethostname(), pid=os.getpid(),
                           role=MasterRole.ACTIVE, epoch=self.epoch, seen_s=0.0)]

    def request_takeover(self, to: str | None) -> tuple[str, str | None, int]:
        raise LeadError("one master keeps its jobs in SQLite: there is no standby (a standby needs "
                        "--store postgresql://...)")

    def close(self) -> None:
        pass


class LeaseLead:
    """PostgreSQL: the lease row ``gangsched_lead``, and each master's presence in ``gangsched_masters``."""

    def __init__(self, url: str, endpoint: str, lease_s: float, renew_every_s: float) -> None:
        import psycopg  # only where PostgreSQL is chosen

        self._psycopg = psycopg
        self._url, self._endpoint, self._lease_s = url, endpoint, lease_s
        self._renew_every_s = min(renew_every_s, lease_s / 5)
        self.epoch = 0
        self._valid_until = 0.0  # monotonic: the lease is this master's until then, by its own clock
        self._renew_at = 0.0
        self._leader: str | None = None
        self._warning = ThrottledWarning(log)
        self._db: Any = None
        try:
            self._connect()
        except psycopg.Error as error:
            raise StoreError(f"the store for the lead cannot be reached: {_first_line(error)}") from None

    @property
    def due(self) -> float:
        return self._renew_at

    def _connect(self) -> None:
        psycopg = self._psycopg
        self._db = psycopg.connect(self._url, autocommit=True, connect_timeout=3, application_name=_LEAD_APPLICATION,
                                   # a link cut mid-request fails it in seconds, not TCP's minutes
                                   tcp_user_timeout=int(self._lease_s * 1000), keepalives_idle=1,
                                   keepalives_interval=1, keepalives_count=2)
        with self._db.transaction():
            for statement in _SCHEMA:
                self._db.execute(statement)

    def _run(self, statement: str, parameters: tuple[Any, ...]) -> list[tuple[Any, ...]] | None:
        """The rows of ``statement``, with this master's presence noted; None if the store cannot be reached
        (tried again, on a new session, at the next call)."""
        psycopg = self._psycopg
        try:
            if self._db is None or self._db.closed:
                self._connect()
            with self._db.pipeline():
                self._db.execute(
                    "INSERT INTO gangsched_masters (endpoint, host, pid, seen) VALUES (%s, %s, %s, now()) "
                    "ON CONFLICT (endpoint) DO UPDATE SET host = excluded.host, pid = excluded.pid, seen = now()",
                    (self._endpoint, socket.gethostname(), os.getpid()))
                # every statement returns rows (RETURNING): fetching them ends the pipeline's round trip
                rows: list[tuple[Any, ...]] = self._db.execute(statement, parameters).fetchall()
            return rows
        except psycopg.Error as error:
            self._warning("the store for the lead cannot be reached: %s", _first_line(error))
            if self._db is not None:
                self._db.close()
            return None

    def take(self, now: float) -> bool:
        rows = self._run(
            "UPDATE gangsched_lead SET epoch = epoch + 1, leader = %s, hand_to = NULL, "
            "expires = now() + make_interval(secs => %s) WHERE expires < now() OR leader = %s "
            "RETURNING epoch, leader", (self._endpoint, self._lease_s, self._endpoint))
        if rows is None:
            return False
        if not rows:
            self._note_leader()  # for the not_leader answers
            return False
        self.epoch = int(rows[0][0])
        self._leader = self._endpoint
        self._valid_until, self._renew_at = now + self._lease_s, now + self._renew_every_s
        # the leader before, stopped or cut off, may hold a transaction open: ended, so that it can
        # write nothing more, before this master reads the store
        ended = self._run("SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE "
                          "datname = current_database() AND application_name = %s", (STORE_APPLICATION,))
        log.info("leads at epoch %d%s", self.epoch,
                 f"; ended {ended[0][0]} session(s) of the leader before" if ended and ended[0][0] else "")
        return True

    def _note_leader(self) -> None:
        rows = self._run("SELECT leader FROM gangsched_lead WHERE expires > now()", ())
        if rows is not None:
            self._leader = rows[0][0] if rows else None

    def keep(self, now: float) -> Kept:
        if now < self._renew_at and now < self._valid_until:
            return Kept.LEADS
        # renewed even past its own reckoning of the lease (continued after a stop): if the epoch is still
        # the row's, no other master led meanwhile
        rows = self._run("UPDATE gangsched_lead SET expires = now() + make_interval(secs => %s) "
                         "WHERE leader = %s AND epoch = %s RETURNING hand_to",
                         (self._lease_s, self._endpoint, self.epoch))
        if rows is None:  # not reached: it leads on until the lease runs out by its clock
            self._renew_at = now + self._renew_every_s
            return Kept.LEADS if now < self._valid_until else self._lost("its lease ran out unrenewed")
        if not rows:
            return self._lost("another master leads")
        self._valid_until, self._renew_at = now + self._lease_s, now + self._renew_every_s
        return Kept.HANDS_OVER if rows[0][0] else Kept.LEADS  # hand_to: a takeover was asked for

    def _lost(self, why: str) -> Kept:
        log.warning("lost the lead of epoch %d (%s): standing by", self.epoch, why)
        self.epoch, self._leader = 0, None
        return Kept.LOST

    def holds(self, now: float) -> bool:
        return self.epoch > 0 and now < self._valid_until

    def hand_over(self) -> None:
        rows = self._run("UPDATE gangsched_lead SET leader = hand_to, hand_to = NULL "
                         "WHERE leader = %s AND epoch = %s AND hand_to IS NOT NULL RETURNING leader",
                         (self._endpoint, self.epoch))
        log.info("handed the lead of epoch %d to %s: standing by", self.epoch, rows[0][0] if rows else "nobody")
        self.epoch, self._leader = 0, rows[0][0] if rows else None

    def leader(self) -> str | None:
        return self._leader

    def masters(self) -> list[MasterInfo]:
        rows = self._run(
            "SELECT m.endpoint, m.host, m.pid, EXTRACT(EPOCH FROM now() - m.seen)::float8, "
            "m.endpoint = l.leader AND l.expires > now(), l.epoch FROM gangsched_masters m, gangsched_lead l "
            "ORDER BY m.endpoint", ())
        if rows is None:
            raise LeadError("the store cannot be reached: the masters are not known")
        return [MasterInfo(endpoint=endpoint, host=host, pid=pid, seen_s=max(0.0, seen_s),
                           role=MasterRole.ACTIVE if active else MasterRole.DOWN
                           if seen_s > _DOWN_AFTER_LEASES * self._lease_s else MasterRole.STANDBY,
                           epoch=int(epoch) if active else 0)
                for endpoint, host, pid, seen_s, active, epoch in rows]

    def request_takeover(self, to: str | None) -> tuple[str, str | None, int]:
        masters = self.masters()
        active = next((master for master in masters if master.role is MasterRole.ACTIVE), None)
        standbys = sorted((master for master in masters if master.role is MasterRole.STANDBY),
                          key=lambda master: master.seen_s)
        target = to or (self._endpoint if self.epoch == 0 else standbys[0].endpoint if standbys else None)
        if target is None:
            raise LeadError("no standby master is up to take the lead")
        if active is not None and target == active.endpoint:
            raise LeadError(f"{target} leads already")
        if target not in [standby.endpoint for standby in standbys]:
            raise LeadError(f"{target} is not a standby master that is up: see gang admin masters")
        if active is None:  # none leads: the first standby to look takes it, and the named one looks now
            return target, None, 0
        rows = self._run("UPDATE gangsched_lead SET hand_to = %s WHERE epoch = %s RETURNING epoch",
                         (target, active.epoch))
        if not rows:
            raise LeadError("the lead changed meanwhile: ask again")
        return target, active.endpoint, active.epoch

    def close(self) -> None:
        if self.epoch:
            self._run("UPDATE gangsched_lead SET expires = '-infinity' WHERE leader = %s AND epoch = %s "
                      "RETURNING epoch", (self._endpoint, self.epoch))
        self._run("DELETE FROM gangsched_masters WHERE endpoint = %s RETURNING endpoint", (self._endpoint,))
        if self._db is not None:
            self._db.close()


def _first_line(error: Exception) -> str:
    return (str(error).strip().splitlines() or [type(error).__name__])[0]
