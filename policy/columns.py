"""Columns as bitmasks: which processors (nodes) a job holds.

The simulator needs only counts, but the live master must name the nodes a
job runs on, so every policy keeps its jobs' columns; a set of columns is one
integer, so "are these free" is one AND, whatever the machine's size.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

Layout = list[dict[int, int]]
"""The time slots of a policy: for each row, job id -> the columns it holds there.
A space-sharing policy has one row."""


def lowest_columns(mask: int, count: int) -> int:
    """The ``count`` lowest columns of ``mask`` (which has at least that many)."""
    if mask.bit_count() == count:
        return mask
    chosen = 0
    for _ in range(count):
        column = mask & -mask
        chosen |= column
        mask ^= column
    return chosen


def column_list(mask: int) -> list[int]:
    """The column numbers of ``mask``, lowest first."""
    columns = []
    while mask:
        column = mask & -mask
        columns.append(column.bit_length() - 1)
        mask ^= column
    return columns


def mask_of(columns: Iterable[int]) -> int:
    """The mask of these column numbers."""
    mask = 0
    for column in columns:
        mask |= 1 << column
    return mask


@dataclass
class ColumnBook:
    """The columns held by the running jobs of a space-sharing policy: the lowest free ones at start."""

    procs: int
    free: int = field(init=False)
    held: dict[int, int] = field(default_factory=dict)  # start order

    def __post_init__(self) -> None:
        self.free = (1 << self.procs) - 1

    def fits(self, count: int) -> bool:
        return count <= self.free.bit_count()

    def take(self, job_id: int, count: int) -> None:
        self.hold(job_id, lowest_columns(self.free, count))

    def hold(self, job_id: int, columns: int) -> None:
        if columns & ~self.free:
            raise ValueError(f"job {job_id}: columns {column_list(columns & ~self.free)} are taken")
        self.free &= ~columns
        self.held[job_id] = columns

    def give(self, job_id: int) -> None:
        self.free |= self.held.pop(job_id)

    def layout(self) -> Layout:
        return [dict(self.held)] if self.held else []
