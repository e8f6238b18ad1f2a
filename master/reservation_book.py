"""Reservations, booked and kept (docs/operations.md, "Reservations"): Slurm's ``scontrol create|update|
delete reservation``, as ``gang admin reservation``.

The book validates a reservation whole (root only; its nodes known; a start
not in the past and an end after it; no other reservation on the same nodes
at the same time; no running job that would still run on its nodes when it
opens, unless ``ignore_jobs``), stores it, and gives every partition's
scheduler the reservations as windows on its own clock
(policy/windows.py), which do the rest: a job of a reservation runs only
on its nodes in its window, time-sharing them under its partition's gang
scheduling; no other job is placed where it would still run when a window
opens. A reservation is over at its end: its jobs still waiting are
cancelled (those running run on, to their own time limits), and it is
removed. A reservation with jobs is not deleted.
"""

import logging

from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_table import JobTable
from gangsched.master.matrices import Matrices
from gangsched.master.nodes import NodeRegistry
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.master.task_reconciliation import TaskReconciliation
from gangsched.master.tiers import Tiers
from gangsched.master.users import known_user
from gangsched.policy.windows import Reservation
from gangsched.protocol.durations import format_duration, parse_duration
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.hostlists import collect_hostlist, expand_hostlist
from gangsched.protocol.messages import ErrorReply
from gangsched.protocol.records import JobSpec, JobState
from gangsched.protocol.reservation_messages import (
    ReservationCreate,
    ReservationDelete,
    ReservationFlag,
    ReservationInfo,
    ReservationList,
    ReservationUpdate,
)
from gangsched.protocol.times import format_time, parse_time

log = logging.getLogger("gangsched.master")

_PAST_S = 1.0  # "now", read as the request travelled, is not in the past


class ReservationBook:
    def __init__(self, store: JobStore, nodes: NodeRegistry, matrices: Matrices, table: JobTable,
                 tasks: TaskReconciliation, tiers: Tiers, endings: Endings, over_time_s: float, now: Now) -> None:
        self._store = store
        self._nodes = nodes
        self._matrices = matrices
        self._table = table
        self._tasks = tasks
        self._tiers = tiers
        self._endings = endings
        self._over_time_s = over_time_s
        self.booked: dict[str, ReservationInfo] = {each.name: each for each in store.reservations()}
        self._publish(now)

    def create(self, message: ReservationCreate, now: Now) -> ReservationList | ErrorReply:
        if message.admin != "root":
            return _refused(f"only root books reservations, not {message.admin}")
        if message.name in self.booked:
            return _refused(f"a reservation {message.name} exists: gang admin reservation update it")
        try:
            start, length = parse_time(message.start, now.wall), parse_duration(message.duration)
        except ValueError as error:
            return _refused(str(error))
        return self._book(message.admin, ReservationInfo(name=message.name, nodes=[], start=start,
                                                         end=start + (length or 0), users=message.users,
                                                         flags=message.flags), message.nodes, length, now)

    def update(self, message: ReservationUpdate, now: Now) -> ReservationList | ErrorReply:
        """What the message gives changes; a reservation begun keeps its start unless given one."""
        old = self.booked.get(message.name)
        if message.admin != "root":
            return _refused(f"only root books reservations, not {message.admin}")
        if old is None:
            return _refused(f"no reservation {message.name}")
        try:
            start = old.start if message.start is None else parse_time(message.start, now.wall)
            length = old.end - old.start if message.duration is None else parse_duration(message.duration)
        except ValueError as error:
            return _refused(str(error))
        changed = old.model_copy(update={
            "start": start, "end": start + (length or 0),
            "users": old.users if message.users is None else message.users,
            "flags": old.flags if message.flags is None else message.flags})
        return self._book(message.admin, changed, message.nodes or collect_hostlist(old.nodes), length, now,
                          new_start=message.start is not None)

    def delete(self, message: ReservationDelete, now: Now) -> ReservationList | ErrorReply:
        if message.admin != "root":
            return _refused(f"only root deletes reservations, not {message.admin}")
        if message.name not in self.booked:
            return _refused(f"no reservation {message.name}")
        jobs = self._jobs_of(message.name)
        if jobs:
            return _refused(f"reservation {message.name} has jobs {','.join(map(str, jobs))}: cancel them first")
        try:
            self._store.save_reservation(message.name, None)
        except StoreWriteError as error:
            return _refused(f"the job store cannot write ({error})", ErrorCode.INTERNAL)
        del self.booked[message.name]
        log.info("reservation %s deleted by %s", message.name, message.admin)
        self._apply(now)
        return self.query()

    def query(self) -> ReservationList:
        return ReservationList(reservations=[each.model_copy(update={"jobs": self._jobs_of(name)})
                                             for name, each in sorted(self.booked.items())])

    def submit_refusal(self, spec: JobSpec) -> str | None:
        """Why a job may not be submitted to the reservation it names, if so."""
        if spec.reservation is None:
            return None
        booked = self.booked.get(spec.reservation)
        if booked is None:
            return f"no reservation {spec.reservation}"
        if spec.user != "root" and spec.user not in (booked.users or []):
            return f"user {spec.user} may not use reservation {spec.reservation}"
        matrix = self._matrices.named(spec.partition or "") or self._matrices.default
        processors = sum(self._nodes.processors(lambda node: node in booked.nodes and matrix.partition.holds(node)))
        if spec.processors > processors:
            return f"needs {spec.processors} processors, reservation {spec.reservation} has {processors} in " \
                f"partition {matrix.name}"
        return None

    def tick(self, now: Now) -> None:
        """Reservations whose end has come are over: their waiting jobs cancelled, themselves removed."""
        over = [name for name, each in self.booked.items() if each.end <= now.wall]
        for name in over:
            try:
                self._store.save_reservation(name, None)
            except StoreWriteError as error:
                log.error("the job store cannot remove reservation %s (%s): tried again", name, error)
                continue
            del self.booked[name]
            log.info("reservation %s is over", name)
            for job in [job for job in self._table.jobs.values()
                        if job.spec.reservation == name and job.state is JobState.PENDING]:
                self._endings.withdraw(job, f"its reservation {name} ended", now)
        if over:
            self._apply(now)

    def _book(self, admin: str, booked: ReservationInfo, hostlist: str, length: float | None, now: Now,
              new_start: bool = True) -> ReservationList | ErrorReply:
        """``booked`` on the nodes of ``hostlist``, checked whole and kept, or refused with nothing changed."""
        if length is None:
            return _refused("a reservation ends: its duration is a time, not UNLIMITED")
        try:
            nodes = expand_hostlist(hostlist)
        except ValueError as error:
            return _refused(str(error))
        known = set(self._nodes.names()) | self._matrices.named_nodes()
        unknown = [node for node in nodes if node not in known]
        if unknown:
            return _refused(f"no node {unknown[0]}")
        strangers = [user for user in booked.users or [] if not known_user(user)]
        if strangers:
            return _refused(f"no user {strangers[0]} on the master's host")
        if new_start and booked.start < now.wall - _PAST_S:
            return _refused(f"its start {format_time(booked.start)} is in the past")
        booked = booked.model_copy(update={"nodes": nodes})
        refusal = self._overlap(booked) or (None if ReservationFlag.IGNORE_JOBS in booked.flags
                                            else self._busy(booked, now))
        if refusal is not None:
            return _refused(refusal)
        try:
            self._store.save_reservation(booked.name, booked)
        except StoreWriteError as error:
            return _refused(f"the job store cannot write ({error})", ErrorCode.INTERNAL)
        self.booked[booked.name] = booked
        log.info("reservation %s booked by %s: %s from %s for %s", booked.name, admin, hostlist,
                 format_time(booked.start), format_duration(length))
        self._apply(now)
        return self.query()

    def _overlap(self, booked: ReservationInfo) -> str | None:
        for other in self.booked.values():
            if other.name != booked.name and set(other.nodes) & set(booked.nodes) and \
                    other.start < booked.end and booked.start < other.end:
                shared = collect_hostlist(sorted(set(other.nodes) & set(booked.nodes)))
                return f"reservation {other.name} holds {shared} from {format_time(other.start)} to " \
                    f"{format_time(other.end)}"
        return None

    def _busy(self, booked: ReservationInfo, now: Now) -> str | None:
        """A running job of no reservation that would still run on its nodes when it opens, by its time limit
        (under time sharing, times the MPL of its partition)."""
        for job in self._table.running():
            if job.spec.reservation == booked.name or not set(job.node_names) & set(booked.nodes):
                continue
            matrix = self._matrices.of(job)
            stretch = matrix.settings.mpl if matrix.queue.scheduler.choice.time_shares else 1
            left = max(0.0, self._table.time_limit(job) - job.ran_s)
            if now.wall + left * stretch + self._over_time_s > booked.start:
                return f"job {job.job_id} may still run on {collect_hostlist(job.node_names)} when it opens (add " \
                    "--flags ignore_jobs to book it anyway)"
        return None

    def _jobs_of(self, name: str) -> list[int]:
        return sorted(job.job_id for job in self._table.jobs.values() if job.spec.reservation == name)

    def _apply(self, now: Now) -> None:
        """The schedulers see the reservations as they are now."""
        self._publish(now)
        self._tasks.follow_nodes(now)

    def _publish(self, now: Now) -> None:
        offset = now.monotonic - now.wall  # the schedulers' clock is the monotonic one
        self._tiers.book(tuple(Reservation(each.name, frozenset(each.nodes), each.start + offset, each.end + offset)
                               for _, each in sorted(self.booked.items())))


def _refused(reason: str, code: ErrorCode = ErrorCode.INVALID_SPEC) -> ErrorReply:
    return ErrorReply.nothing_changed(ErrorCode.PERMISSION_DENIED if reason.startswith("only root") else code, reason)
