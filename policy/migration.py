"""Migration in the Ousterhout matrix (Zhang et al., Euro-Par 2000; docs/policies.md).

A job moves into a row on other columns (option 2), or the jobs in its way
move aside to other columns of that row (option 1), whichever costs less:
with C one checkpoint and restart, option 1 charges the job C/2 and each job
in the way C, option 2 the job C and each job in the way C/2 (per task, as
eq. 4 and 5 of Zhang et al. 2000 count it). At most Q tasks migrate per time
slice.
"""

import math
from dataclasses import dataclass, field

from gangsched.policy.ousterhout import OusterhoutMatrix, Placed, Row
from gangsched.policy.topology import Topology


@dataclass
class Event:
    """What one scheduling event may still migrate, in tasks, and the work it has charged."""

    budget: float
    extra_work: dict[int, float] = field(default_factory=dict)

    def charge(self, placed: Placed, seconds: float) -> None:
        if seconds:
            job_id = placed.job.job_id
            self.extra_work[job_id] = self.extra_work.get(job_id, 0.0) + seconds


class SliceBudget:
    """Q tasks per time slice: the budget is renewed when the clock enters a new slice."""

    def __init__(self, limit: int | None, slice_s: float) -> None:
        self._limit, self._slice_s = limit, slice_s
        self._slice = -1
        self.left = 0.0

    def at(self, now: float) -> float:
        if self._limit is None:
            return math.inf
        current = math.floor(now / self._slice_s)
        if current != self._slice:
            self._slice, self.left = current, float(self._limit)
        return self.left


class Migrator:
    """Moves that take other columns; each returns the tasks it migrated, or None if it did not move."""

    def __init__(self, matrix: OusterhoutMatrix, topology: Topology) -> None:
        self._matrix = matrix
        self._topology = topology

    def into_row(self, placed: Placed, target: Row, now: float, event: Event, cost: float) -> int | None:
        """Move ``placed`` into ``target`` on other columns, or push aside the jobs in its way."""
        matrix = self._matrix
        width = placed.columns.bit_count()
        free = target.free(matrix.full)
        if free.bit_count() < width or event.budget <= 0:
            return None  # either way the target ends up holding the job as well
        in_the_way = matrix.blocking(placed, target)
        pushed = sum(other.columns.bit_count() for other in in_the_way)
        room_beside = (free | union(in_the_way)) & ~placed.columns
        can_push = pushed <= event.budget and migratable(in_the_way)
        aside = self._places_aside(in_the_way, room_beside) if can_push else None
        can_move = width <= event.budget and placed.job.migratable
        moved_to = self._topology.choose(matrix.memory.usable(placed.job, free, moving=True), placed.job) \
            if can_move else None
        options = []
        if aside is not None:
            options.append((cost / 2 * width + cost * pushed, 1))
        if moved_to is not None:
            options.append((cost * width + cost / 2 * pushed, 2))
        if not options:
            return None
        _, option = min(options)
        if option == 1:
            assert aside is not None
            self._push_aside(aside, target, event, cost)
            matrix.move(placed, target, now)
            event.charge(placed, cost / 2)
            return pushed
        matrix.move(placed, target, now, columns=moved_to)
        event.charge(placed, cost)
        for other in in_the_way:
            event.charge(other, cost / 2)
        return width

    def make_room(self, placed: Placed, row: Row, event: Event, cost: float) -> int | None:
        """FillMatrix-2: push aside the jobs in the way if they appear nowhere else (option 1)."""
        matrix = self._matrix
        if row.free(matrix.full).bit_count() < placed.columns.bit_count() or event.budget <= 0:
            return None
        copied = union(list(row.copies.values()))
        in_the_way = matrix.blocking(placed, row)
        if copied & placed.columns or any(other.copies for other in in_the_way) or not migratable(in_the_way):
            return None
        pushed = sum(other.columns.bit_count() for other in in_the_way)
        room = (row.free(matrix.full) | union(in_the_way)) & ~placed.columns
        aside = self._places_aside(in_the_way, room) if pushed <= event.budget else None
        if aside is None:
            return None
        self._push_aside(aside, row, event, cost)
        event.charge(placed, cost / 2)
        return pushed

    def _places_aside(self, in_the_way: list[Placed], room: int) -> dict[int, tuple[Placed, int]] | None:
        """New columns in ``room`` for each job in the way, or None if they do not all fit there
        (their memory too: a job that moves commits its memory on its new nodes)."""
        places = {}
        for other in in_the_way:
            columns = self._topology.choose(room, other.job)
            if columns is None:
                return None
            room &= ~columns
            places[other.job.job_id] = (other, columns)
        if not self._matrix.memory.fits_moves([(other.job, columns) for other, columns in places.values()]):
            return None
        return places

    def _push_aside(self, places: dict[int, tuple[Placed, int]], row: Row, event: Event, cost: float) -> None:
        for other, _ in places.values():
            row.occupied &= ~other.columns
        for other, columns in places.values():
            other.columns = columns
            row.occupied |= columns
            self._matrix.memory.move(other.job, columns)
            event.charge(other, cost)


def migratable(placed: list[Placed]) -> bool:
    return all(each.job.migratable for each in placed)


def union(placed: list[Placed]) -> int:
    columns = 0
    for each in placed:
        columns |= each.columns
    return columns
