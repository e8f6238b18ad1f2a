"""Gang scheduling over the Ousterhout matrix: GS, BGS, MGS, MBGS (Zhang et al. 2000; Zhang
et al., Euro-Par 2000), and the queue for large jobs (Zhou & Brent 2001); docs/policies.md.

The matrix is rebuilt at every scheduling event (an arrival or a departure):

1. CleanMatrix: every job back to its home row only.
2. CollapseMatrix-1: from the least to the most populated row, each job moves
   to a more populated row where its columns are free.
3. Schedule-1: the queue in priority order (arrival order among equal
   priorities: policy/priority_order.py); each job goes to the row
   with the fewest free columns that holds it (best fit), or to a new row
   while the MPL allows. GS stops at the first job that does not fit.
4. With migration: CollapseMatrix-2, where a job may also move to other
   columns of the target row (option 2) or push the jobs in its way to other
   columns (option 1), whichever costs less, at most Q tasks per time slice; a
   row is emptied whole or not touched. Then Schedule-2, if a row was emptied.
5. FillMatrix-1: running jobs, in start order, are copied into rows where
   their columns are free, one row per job per pass, until nothing changes;
   with migration FillMatrix-2 also pushes aside jobs that appear nowhere
   else (option 1 only).

With backfilling (BGS, MBGS) Schedule goes on past a job that does not fit:
that job gets a reservation in the row where it would start earliest, by the
estimates under gang scheduling (dedicated estimate × MPL), and no later job,
no move of CollapseMatrix, may break a reservation (``policy/reservations.py``).
FillMatrix ignores them: its copies are gone at the next event.

A job in k of the R rows runs at rate k / R, less the context-switch overhead
CS when rows alternate (the fluid view of round-robin time slices). What a
migration costs and how many may happen: ``policy/migration.py``.

The queue for large jobs: a job whose estimate exceeds α · t_max waits in its
own queue, FCFS or backfilled; no processor is ever shared by more than j_max
large jobs; small jobs enter the matrix at once (the number of rows is not
capped). Large jobs are placed before small ones, so that a departure first
lets the head of the large queue start.

A reorder of the queue gives up every waiting job's reservation, so that the
next pass hands them out again in the new order: a job never holds a
reservation that a job of higher priority behind it would have had.

Invariants: no cell holds two jobs; a job has the same columns in every row it
appears in; every running job has a home row, so it runs in every cycle.
"""

import dataclasses
from collections.abc import Mapping

from gangsched.policy.collapse_undo import CollapseUndo
from gangsched.policy.columns import Layout
from gangsched.policy.interface import Decision, Job, TimeSharing
from gangsched.policy.large_jobs import LargeJobs
from gangsched.policy.matrix_settings import RESERVATION_DEPTH, MatrixPolicyKind, MatrixSettings, MatrixStats
from gangsched.policy.memory import Limit, MemoryRequest
from gangsched.policy.migration import Event, Migrator, SliceBudget
from gangsched.policy.ousterhout import OusterhoutMatrix, Placed, Row
from gangsched.policy.paired import BAND, band_breakers, within_band
from gangsched.policy.predictor import ALONE
from gangsched.policy.priority_order import enqueue, reorder_jobs
from gangsched.policy.reservations import Reservations
from gangsched.policy.topology import Topology


class MatrixPolicy:
    def __init__(self, procs: int, settings: MatrixSettings, name: str = "gs",
                 topology: Topology | None = None) -> None:
        self.name = name
        self.settings = settings
        self.topology = topology or Topology.uniform(procs)
        self.matrix = OusterhoutMatrix(self.topology, backfilled=settings.backfill)
        self.queue: list[Job] = []
        self.large_queue: list[Job] = []
        self.reservations = Reservations(self.matrix, self.topology)
        self.rates: dict[int, float] = {}
        self.stats = MatrixStats()
        self._last_event: float | None = None
        self._freed = False  # since the last event; else no queued job can start any sooner
        self._settled = 0  # the queue's first jobs, all holding reservations, as the last backfilling pass left them
        self._budget = SliceBudget(settings.migrate_per_slice, settings.time_slice_s)
        self._migrator = Migrator(self.matrix, self.topology)

    def submit(self, job: Job, now: float) -> None:
        large = self.settings.large
        if large is not None and job.estimate > large.threshold_s:
            enqueue(self.large_queue, job)
        else:
            enqueue(self.queue, job)

    def reorder(self, now: float) -> None:
        moved = [queue for queue in (self.large_queue, self.queue) if reorder_jobs(queue)]
        if not moved:
            return
        for queue in moved:
            for job in queue:
                held = self.reservations.release(job)
                if held is not None:
                    self.reservations.roomier.add(held.row)
        self._settled = 0
        self._freed = True

    def withdraw(self, job: Job, now: float) -> None:
        """Out of its queue, its reservation given up: the next pass looks again at every job it held back."""
        (self.large_queue if job in self.large_queue else self.queue).remove(job)
        held = self.reservations.release(job)
        if held is not None:
            self.reservations.roomier.add(held.row)
        self._freed = True

    def finish(self, job: Job, now: float) -> None:
        self.reservations.roomier.add(self.matrix.placed[job.job_id].home)
        self.matrix.end(job.job_id, now)
        del self.rates[job.job_id]
        self._freed = True

    def schedule(self, now: float) -> Decision:
        self._account(now)
        settings, matrix = self.settings, self.matrix
        if settings.backfill:
            for row in matrix.rows:
                row.profile.advance(now)
        event = Event(budget=self._budget.at(now))
        matrix.clean()
        self._collapse(now, event, migrate=False)
        self._schedule_queues(now)
        if settings.migration and self._collapse(now, event, migrate=True):
            self._schedule_queues(now)  # only a row emptied by migration makes new room
        self._fill(event, migrate=False)
        if settings.migration:
            self._fill(event, migrate=True)
        self._freed = False
        self.reservations.roomier.clear()
        self._budget.left = event.budget
        return Decision(rates=self._rate_changes(), extra_work=event.extra_work)

    def layout(self) -> Layout:
        return self.matrix.layout()

    def adopt(self, job: Job, columns: int, started: float, now: float) -> None:
        """Into the fullest row where its columns are free, else a new row (even past the MPL: it runs)."""
        matrix = self.matrix
        rows = [row for row in matrix.rows if not columns & row.occupied]
        row = max(rows, key=lambda row: row.population) if rows else matrix.new_row()
        end = started + job.estimate * self._slots_for_estimates()
        matrix.start(job, row, columns, now, end)
        self.rates[job.job_id] = 0.0

    def time_sharing(self) -> TimeSharing:
        return TimeSharing(self.stats.average_slots, self.stats.migrations, self.stats.migrated_tasks)

    def set_migration_cost(self, seconds: float) -> None:
        """C as measured on the live cluster."""
        self.settings = dataclasses.replace(self.settings, migration_cost_s=seconds)

    def homogenize(self, predictions: Mapping[int, float], now: float, band: float = BAND) -> None:
        """Slot homogeneity, for paired gang scheduling (Wiseman & Feitelson 2003, §2.5).

        A job predicted ``band`` or more above the lowest of its row moves, on
        its own columns, to another row whose band it fits, else to a new row
        while the MPL allows, else it stays. Reservations are respected. The
        copies of FillMatrix are cleaned and not made again before the next
        scheduling event: they ignore bands, and alternate scheduling fills
        idle cells within the band instead.
        """
        matrix, mpl = self.matrix, self.settings.mpl
        matrix.clean()
        for row in list(matrix.rows):
            for job_id in band_breakers(row.homes, predictions, band):
                placed = row.homes[job_id]
                utilization = predictions.get(job_id, ALONE)
                target = next((
                    other for other in matrix.rows
                    if other is not row and not placed.columns & other.occupied
                    and within_band(other.homes, predictions, utilization, band)
                    and other.admits(placed.columns.bit_count(), now, placed.estimated_end)
                ), None)
                if target is None and (mpl is None or len(matrix.rows) < mpl):
                    target = matrix.new_row()
                if target is not None:
                    matrix.move(placed, target, now)
                    self.reservations.roomier.add(row)
        self._drop_empty_rows()
        self._rate_changes()

    # CollapseMatrix

    def _collapse(self, now: float, event: Event, migrate: bool) -> bool:
        """Without migration any move that fits is free; with migration, a row is emptied or left alone:
        moving a job that costs a checkpoint, where no row disappears, buys nothing sure.
        True if a row was emptied by migration."""
        matrix = self.matrix
        emptied = False
        for source in sorted(matrix.rows, key=lambda row: row.population):
            # moves only make the source emptier and the targets fuller: the targets stay valid
            counted = [(row, row.population) for row in matrix.rows]  # once: rows past the MPL make many
            least = source.population
            targets = [row for row, _ in sorted(((row, population) for row, population in counted
                                                 if population > least), key=lambda pair: -pair[1])]
            if not targets or not source.homes:
                continue
            if migrate:
                emptied |= self._empty(source, targets, now, event)
                continue
            for placed in list(source.homes.values()):
                for target in targets:
                    if not placed.columns & target.occupied and self._move(placed, target, now, event, False):
                        self._freed = True
                        self.reservations.roomier.add(source)
                        break
        self._drop_empty_rows()
        return emptied

    def _drop_empty_rows(self) -> None:
        for row in self.matrix.drop_empty_rows():
            self.reservations.drop_row(row)
            self._settled = 0  # the jobs of its reservations hold none now, wherever they are in the queue

    def _empty(self, source: Row, targets: list[Row], now: float, event: Event) -> bool:
        """Move every job of ``source`` into the targets, migrating where needed, or none at all."""
        full = self.matrix.full
        if source.population > sum(target.free(full).bit_count() for target in targets):
            return False
        undo = CollapseUndo.of(self.matrix, event, self.stats)
        for placed in list(source.homes.values()):
            if not (any(self._move(placed, target, now, event, migrate=False) for target in targets)
                    or any(self._move(placed, target, now, event, migrate=True) for target in targets)):
                self.stats = undo.restore(self.matrix, event)
                return False
        self._freed = True
        self.reservations.roomier.add(source)
        return True

    def _move(self, placed: Placed, target: Row, now: float, event: Event, migrate: bool) -> bool:
        in_the_way = placed.columns & target.occupied
        if in_the_way and not migrate:
            return False
        if not target.admits(placed.columns.bit_count(), now, placed.estimated_end):
            return False
        if not in_the_way:
            self.matrix.move(placed, target, now)
            return True
        return self._migrate(placed, target, now, event)

    def _migrate(self, placed: Placed, target: Row, now: float, event: Event) -> bool:
        tasks = self._migrator.into_row(placed, target, now, event, self.settings.migration_cost_s)
        if tasks is None:
            return False
        self._count_migration(event, tasks)
        return True

    def _count_migration(self, event: Event, tasks: int) -> None:
        event.budget -= tasks
        self.stats.migrations += 1
        self.stats.migrated_tasks += tasks

    # Schedule

    def _schedule_queues(self, now: float) -> None:
        large = self.settings.large
        if large is not None:
            self._schedule_large(now, large)
        self._schedule(self.queue, now, self.matrix.full)

    def _schedule(self, queue: list[Job], now: float, allowed: int) -> None:
        backfill = self.settings.backfill
        room = self._room(allowed)
        memory_rooms: dict[MemoryRequest, int] = {}  # per request: ``room`` on the nodes that hold it
        # with nothing ended or moved since the last pass, every job it left in the queue holds a reservation
        # and can start no sooner: only the jobs that came since (the tail) are tried, whatever the depth
        first = self._settled if backfill and not self._freed else 0
        # and no further than the depth: the jobs that start count nothing, so every processor that can be
        # used is, but at most ``depth`` jobs hold reservations and the rest wait their turn untried
        depth = self.settings.reservation_depth if backfill else None
        waiting: list[Job] = []
        stop = len(queue)
        for index in range(first, len(queue)):
            if depth is not None and first + len(waiting) >= depth:
                stop = index
                break
            job = queue[index]
            if job.job_id in self.reservations.held and not self._freed:
                waiting.append(job)  # nothing ended or moved: it can start no sooner
                continue
            held = self.reservations.release(job)
            memory = self.matrix.memory.limit(job) if job.procs <= room else None
            if job.procs <= room and self._may_fit(job, allowed, memory, memory_rooms) \
                    and self._place(job, now, allowed, memory):
                room = self._room(allowed)
                memory_rooms.clear()
                continue
            if not backfill:  # GS stops at the first job that does not fit, all before it started: the rest stay
                del queue[:index]
                return
            self.reservations.reserve(job, now, job.estimate * self._slots_for_estimates(), held)
            waiting.append(job)
        queue[first:stop] = waiting
        self._settled = first + len(waiting) if backfill else 0

    def _may_fit(self, job: Job, allowed: int, memory: Limit | None, memory_rooms: dict[MemoryRequest, int]) -> bool:
        """Whether some row has as many free columns as ``job`` on nodes that hold its ``memory``: where
        memory binds, most of a queue fails here, once per request until a job starts, rather than
        row by row in ``_place``."""
        if memory is None:
            return True
        most = memory_rooms.get(job.memory)
        if most is None:
            most = memory_rooms[job.memory] = self._room(allowed & memory.mask)
        return job.procs <= most

    def _room(self, allowed: int) -> int:
        """The most columns a job could get now: in the emptiest row, or in a new one."""
        mpl = self.settings.mpl
        if mpl is None or len(self.matrix.rows) < mpl:
            return allowed.bit_count()
        return max(((row.free(self.matrix.full) & allowed).bit_count() for row in self.matrix.rows), default=0)

    def _place(self, job: Job, now: float, allowed: int, memory: Limit | None) -> bool:
        """In the best-fit row whose free columns hold it, on nodes that hold its ``memory`` (the same in
        every row: stopped jobs stay resident)."""
        matrix, width, topology = self.matrix, job.procs, self.topology
        end = now + job.estimate * self._slots_for_estimates()
        usable = allowed if memory is None else allowed & memory.mask
        capped = memory.apply if memory is not None and memory.caps else None  # nodes with room for fewer tasks
        best: Row | None = None
        best_free = 0
        fewest = matrix.width + 1
        for row in matrix.rows:
            free = usable & ~row.occupied
            if capped is not None:
                free = capped(free)
            count = free.bit_count()
            if width <= count < fewest and row.admits(width, now, end) and topology.fits(free, job):
                best, best_free, fewest = row, free, count
        mpl = self.settings.mpl
        if best is None:
            room = allowed if memory is None else memory.apply(allowed)
            if (mpl is not None and len(matrix.rows) >= mpl) or not topology.fits(room, job):
                return False
            best, best_free = matrix.new_row(), room
        columns = topology.choose(best_free, job)
        assert columns is not None  # it fits there
        matrix.start(job, best, columns, now, end)
        self.rates[job.job_id] = 0.0
        return True

    def _slots_for_estimates(self) -> int:
        """MPL for BGS; the current number of slots under the large-job queue (Zhou & Brent 2001)."""
        return self.settings.mpl or max(len(self.matrix.rows), 1)

    def _schedule_large(self, now: float, large: LargeJobs) -> None:
        waiting = []
        shadow: float | None = None
        for index, job in enumerate(self.large_queue):
            allowed = self.matrix.full & ~large.saturated(self.matrix)
            fits_in_time = shadow is None or now + job.estimate * self._slots_for_estimates() <= shadow
            if fits_in_time and self._place(job, now, allowed, self.matrix.memory.limit(job)):
                continue
            waiting.append(job)
            if not large.backfill:
                waiting.extend(self.large_queue[index + 1:])
                break
            if shadow is None:
                shadow = large.shadow(self.matrix, job)
        self.large_queue[:] = waiting

    # FillMatrix

    def _fill(self, event: Event, migrate: bool) -> None:
        """Pass after pass over the jobs in start order, each copied into the first open row that takes it,
        until a pass copies none. Without migration a row only fills, so a job no row took in one pass
        takes none in the next: each pass after the first looks only at the jobs the last one copied."""
        matrix = self.matrix
        candidates = list(matrix.placed.values())
        while candidates:
            open_rows = [row for row in matrix.rows if row.occupied != matrix.full]
            if not open_rows:
                return
            copied = []
            for placed in candidates:
                columns = placed.columns
                for row in open_rows:
                    # a row that holds the job has its columns taken, by the job itself
                    if not columns & row.occupied or (
                        migrate and not row.holds(placed) and self._make_room(placed, row, event)
                    ):
                        matrix.copy(placed, row)
                        copied.append(placed)
                        break
            candidates = list(matrix.placed.values()) if migrate and copied else copied

    def _make_room(self, placed: Placed, row: Row, event: Event) -> bool:
        tasks = self._migrator.make_room(placed, row, event, self.settings.migration_cost_s)
        if tasks is None:
            return False
        self._count_migration(event, tasks)
        return True

    # rates and statistics

    def _rate_changes(self) -> dict[int, float]:
        rows = len(self.matrix.rows)
        switching = 1.0 if rows <= 1 else 1.0 - self.settings.context_switch
        changes = {}
        for job_id, placed in self.matrix.placed.items():
            rate = (1 + placed.copies) / rows * switching
            if self.rates.get(job_id) != rate:
                self.rates[job_id] = changes[job_id] = rate
        return changes

    def _account(self, now: float) -> None:
        if self._last_event is not None:
            elapsed = now - self._last_event
            self.stats.seconds += elapsed
            self.stats.slot_seconds += len(self.matrix.rows) * elapsed
        self._last_event = now


def matrix_policy(kind: MatrixPolicyKind, procs: int, mpl: int = 5, context_switch: float = 0.0,
                  migration_cost_s: float = 0.0, migrate_per_slice: int | None = None,
                  time_slice_s: float = 200.0, large: LargeJobs | None = None,
                  topology: Topology | None = None,
                  reservation_depth: int | None = RESERVATION_DEPTH) -> MatrixPolicy:
    """One of the papers' matrix policies by name."""
    settings = MatrixSettings(
        mpl=None if kind is MatrixPolicyKind.GS_LARGE_QUEUE else mpl,
        backfill=kind in (MatrixPolicyKind.BGS, MatrixPolicyKind.MBGS),
        migration=kind in (MatrixPolicyKind.MGS, MatrixPolicyKind.MBGS),
        context_switch=context_switch,
        migration_cost_s=migration_cost_s,
        migrate_per_slice=migrate_per_slice,
        time_slice_s=time_slice_s,
        large=large if kind is MatrixPolicyKind.GS_LARGE_QUEUE else None,
        reservation_depth=reservation_depth,
    )
    return MatrixPolicy(procs, settings, name=kind.value, topology=topology)
