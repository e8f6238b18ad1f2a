"""The Ousterhout matrix of the matrix policies, with columns as bitmasks.

Rows are time slots, columns are processors (nodes). A job's columns are one
integer bitmask, the same in every row it appears in (no ping-pong), so "are
these columns free in that row" is one AND, whatever the machine's size. Every
running job has one home row and may have copies in other rows (FillMatrix);
copies are temporary and cleaned at the next scheduling event.

With backfilling (BGS, MBGS) each row also keeps a profile of free columns over
future time (Zhang et al. 2000, §5.2: each row is a machine to backfill): its jobs until
their estimated end under gang scheduling, and the reservations of queued jobs.
Counting columns is exact here because a job that starts picks any free
columns of its row.
"""

from dataclasses import dataclass, field

from gangsched.policy.columns import Layout
from gangsched.policy.interface import Job
from gangsched.policy.memory import MemoryBook
from gangsched.policy.profile import Profile
from gangsched.policy.topology import Topology


@dataclass(eq=False)
class Placed:
    """A running job: its columns, its home row, and how many rows it appears in."""

    job: Job
    columns: int
    start: float
    estimated_end: float  # the estimate under gang scheduling: dedicated estimate × MPL
    home: "Row"
    copies: int = 0


@dataclass(eq=False)
class Row:
    columns: int  # the machine's size, for the profile
    backfilled: bool
    occupied: int = 0
    homes: dict[int, Placed] = field(default_factory=dict)  # start order
    copies: dict[int, Placed] = field(default_factory=dict)
    profile: Profile = field(init=False)

    def __post_init__(self) -> None:
        self.profile = Profile(self.columns)

    @property
    def population(self) -> int:
        return self.occupied.bit_count()

    def free(self, full: int) -> int:
        return full & ~self.occupied

    def holds(self, placed: Placed) -> bool:
        return placed.job.job_id in self.homes or placed.job.job_id in self.copies

    def admits(self, width: int, now: float, end: float) -> bool:
        """Whether a job may take ``width`` columns until ``end`` without breaking a reservation."""
        return not self.backfilled or self.profile.fits(width, now, end)


@dataclass
class OusterhoutMatrix:
    topology: Topology
    backfilled: bool = False
    rows: list[Row] = field(default_factory=list)
    placed: dict[int, Placed] = field(default_factory=dict)  # start order
    memory: MemoryBook = field(init=False)  # a job commits its memory once, in all its rows
    width: int = field(init=False)  # columns
    full: int = field(init=False)  # the mask of every column

    def __post_init__(self) -> None:
        self.memory = MemoryBook(self.topology)
        self.width = self.topology.width
        self.full = (1 << self.width) - 1

    def new_row(self) -> Row:
        row = Row(self.width, self.backfilled)
        self.rows.append(row)
        return row

    def start(self, job: Job, row: Row, columns: int, now: float, estimated_end: float) -> Placed:
        placed = Placed(job, columns, now, estimated_end, row)
        self.placed[job.job_id] = placed
        self.memory.commit(job, columns)
        self._settle(placed, row, now)
        return placed

    def end(self, job_id: int, now: float) -> None:
        placed = self.placed.pop(job_id)
        self.memory.release(job_id)
        self._unsettle(placed, now)
        for row in self.rows:
            if row.copies.pop(job_id, None) is not None:
                row.occupied &= ~placed.columns

    def move(self, placed: Placed, row: Row, now: float, columns: int | None = None) -> None:
        """Change a job's home row, and its columns if it migrates."""
        self._unsettle(placed, now)
        if columns is not None:
            placed.columns = columns
            self.memory.move(placed.job, columns)
        self._settle(placed, row, now)

    def copy(self, placed: Placed, row: Row) -> None:
        row.occupied |= placed.columns
        row.copies[placed.job.job_id] = placed
        placed.copies += 1

    def clean(self) -> None:
        """CleanMatrix: every job back to its home row only."""
        for row in self.rows:
            for placed in row.copies.values():
                row.occupied &= ~placed.columns
                placed.copies = 0
            row.copies.clear()

    def drop_empty_rows(self) -> list[Row]:
        dropped = [row for row in self.rows if not row.homes]
        self.rows = [row for row in self.rows if row.homes]
        return dropped

    def layout(self) -> Layout:
        return [{job_id: placed.columns for job_id, placed in (row.homes | row.copies).items()} for row in self.rows]

    def blocking(self, placed: Placed, row: Row) -> list[Placed]:
        """The jobs of ``row`` on ``placed``'s columns: S(A) of Zhang et al. 2000, §5.4."""
        return [other for other in row.homes.values() if other.columns & placed.columns]

    def _settle(self, placed: Placed, row: Row, now: float) -> None:
        placed.home = row
        row.homes[placed.job.job_id] = placed
        row.occupied |= placed.columns
        if row.backfilled and placed.estimated_end > now:
            row.profile.reserve(placed.columns.bit_count(), now, placed.estimated_end)

    def _unsettle(self, placed: Placed, now: float) -> None:
        row = placed.home
        del row.homes[placed.job.job_id]
        row.occupied &= ~placed.columns
        if row.backfilled and placed.estimated_end > now:
            row.profile.advance(now)
            row.profile.release(placed.columns.bit_count(), now, placed.estimated_end)
