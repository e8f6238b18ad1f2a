"""The master's store, as the rest of the master sees it: one interface, whatever engine holds it.

Jobs, users and their limits, reservations, the nodes an administrator took out of service and the record of
every administrative command persist here so that a master restart loses nothing. Only the
changes of a job's life are written (submit, start, end, requeue) and the
administrator's settings of users, never what is measured each quantum, so
the store stays off the switch path. Each write is whole or not at all: one
that fails raises ``StoreWriteError`` and keeps nothing of itself
(master/closing.py says what the master does then). The writes are made
durable together, by ``commit``, once for each turn of the master's loop
(group commit); until then nothing that depends on them leaves the master
(master/loop.py holds the replies and the orders to nodes). A commit that
fails keeps every write for the next one. SQLite is the embedded engine
(master/sqlite_store.py); nothing else of the master knows which it has.
"""

from typing import Protocol

from gangsched.master.accounts import Account
from gangsched.master.job_record import Job
from gangsched.master.nodes import NodeMark
from gangsched.master.stats import Timings
from gangsched.protocol.admin_messages import AdminAction
from gangsched.protocol.records import UserLimits
from gangsched.protocol.reservation_messages import ReservationInfo


class StoreError(Exception):
    """The store cannot be opened (a schema of another version, a file it may not open): with the reason."""


class StoreWriteError(Exception):
    """A write the store could not take (a full disk, a lost database): nothing of it was kept."""


class RecordRefused(Exception):
    """A record the engine cannot hold (a number past its column's type): nothing of the write was kept,
    and it is not worth trying again as it is; the store writes others as before."""


class JobStore(Protocol):
    write_time: Timings  # of each commit

    def next_job_id(self) -> int: ...

    @property
    def pending(self) -> bool:
        """Whether writes wait for a commit."""

    def commit(self) -> None:
        """Every write since the last commit made durable at once; ``StoreWriteError`` if not (all kept)."""

    def submitted(self, jobs: list[Job], token: str | None) -> None:
        """New jobs (one, or an array's) and the client's token for the first: all or none."""

    def closed(self, job: Job, account: Account | None) -> None:
        """A job's end (or its requeue) and its user's use: both or neither."""

    def save(self, *jobs: Job) -> None:
        """Jobs' new states (a start, a hold): all or none."""

    def save_account(self, account: Account) -> None: ...

    def job_of_token(self, user: str, token: str) -> int | None: ...

    def active(self) -> list[Job]:
        """The pending and running jobs, in job order."""

    def finished(self, limit: int) -> list[Job]:
        """The last ``limit`` finished jobs, in job order."""

    def ended_since(self, since: float, after_id: int, limit: int) -> list[Job]:
        """The first ``limit`` finished jobs above ``after_id`` that ended at ``since`` or later."""

    def get(self, job_id: int) -> Job | None: ...

    def quarantined(self) -> list[tuple[int, str]]:
        """The job records the store set aside as it read them (ones this gangsched would refuse): each id
        and why."""

    def accounts(self) -> list[Account]: ...

    def save_node_marks(self, marks: dict[str, NodeMark | None]) -> None:
        """Nodes drained or taken down (their mark), or back in service (None): all or none."""

    def node_marks(self) -> dict[str, NodeMark]: ...

    def save_limits(self, user: str, limits: UserLimits) -> None:
        """A user's limits in every partition or one (none set: removed)."""

    def user_limits(self) -> list[tuple[str, UserLimits]]: ...

    def save_reservation(self, name: str, reservation: ReservationInfo | None) -> None:
        """A reservation booked or changed, or (None) deleted."""

    def reservations(self) -> list[ReservationInfo]: ...

    def record_action(self, time: float, user: str, command: str, result: str,
                      token: str | None = None) -> AdminAction:
        """One administrative command and its result (done, or the refusal), numbered in order, with the
        client's token for it."""

    def action_of_token(self, user: str, token: str) -> AdminAction | None:
        """The recorded command ``user`` sent with ``token``, if any (written or not yet committed)."""

    def admin_log(self, after: int, limit: int) -> list[AdminAction]:
        """The first ``limit`` recorded commands numbered above ``after``."""

    def close(self) -> None: ...
