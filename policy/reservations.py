"""Backfilling's reservations in the Ousterhout matrix (BGS, MBGS: Zhang et al. 2000; docs/policies.md).

A queued job that does not fit gets a reservation in the row where it would
start earliest, by the estimates under gang scheduling: each row's columns
are planned over time (``policy/profile.py``), and memory is the machine's,
freed as placed jobs end (``policy/memory.py``). No later job and no move of
CollapseMatrix may break one.
"""

import math
from collections.abc import Iterable
from dataclasses import dataclass

from gangsched.policy.interface import Job
from gangsched.policy.memory import MemoryRequest
from gangsched.policy.ousterhout import OusterhoutMatrix, Row
from gangsched.policy.topology import Topology


@dataclass
class Reservation:
    row: Row
    start: float
    duration: float

    @property
    def end(self) -> float:
        return self.start + self.duration


class Reservations:
    def __init__(self, matrix: OusterhoutMatrix, topology: Topology) -> None:
        self.held: dict[int, Reservation] = {}  # by job id
        self.roomier: set[Row] = set()  # rows whose profile gained room: where reservations may move up
        self._matrix, self._topology = matrix, topology
        self._memory_plans: dict[tuple[MemoryRequest, int, int | None, int | None, int], float] = {}
        self._memory_plans_version, self._memory_plans_at = -1, 0.0  # the book's version, the instant planned at

    def release(self, job: Job) -> Reservation | None:
        """Give ``job``'s reservation up while it is tried again; the one it held, if any."""
        held = self.held.pop(job.job_id, None)
        if held is not None:
            held.row.profile.release(job.procs, held.start, held.end)
        return held

    def drop_row(self, row: Row) -> None:
        """``row`` is gone: its reservations with it (their jobs get new ones at the next event)."""
        for job_id in [job_id for job_id, held in self.held.items() if held.row is row]:
            del self.held[job_id]

    def reserve(self, job: Job, now: float, duration: float, held: Reservation | None) -> None:
        """The earliest start over the rows; a reservation held before still holds, so only rows
        that gained room since can offer an earlier one."""
        best: Reservation | None = None
        rows: Iterable[Row] = self._matrix.rows
        if held is not None and held.duration == duration:
            best, rows = held, [row for row in self._matrix.rows if row in self.roomier]
        request = job.memory
        after = self._memory_frees(job, now) if request.per_node or request.per_task else now
        for row in rows:
            limit = best.start if best is not None else math.inf
            start = row.profile.earliest(job.procs, duration, after, limit)
            if start < limit:
                best = Reservation(row, start, duration)
        if best is None:  # no row yet, where a job kept off every column for now (a window not open) waits
            return
        if held is not None and best is not held:
            self.roomier.add(held.row)
        best.row.profile.reserve(job.procs, best.start, best.end)
        self.held[job.job_id] = best

    def _memory_frees(self, job: Job, now: float) -> float:
        """When ``job``'s memory fits, by the placed jobs' estimated ends. A queue holds many jobs of
        one request and shape, and the answer holds until a commitment changes."""
        book = self._matrix.memory
        if self._memory_plans_version != book.version or self._memory_plans_at != now:
            self._memory_plans.clear()
            self._memory_plans_version, self._memory_plans_at = book.version, now
        key = (job.memory, job.procs, job.nodes, job.tasks_per_node, job.cpus_per_task)
        after = self._memory_plans.get(key)
        if after is None:
            memory = book.limit(job)
            if memory is None or self._topology.fits(memory.apply(self._matrix.full), job):
                after = now  # it fits now, as far as memory goes
            else:
                ends = [(placed.estimated_end, job_id) for job_id, placed in self._matrix.placed.items()]
                after = book.first_room(job, ends, now)
            self._memory_plans[key] = after
        return after
