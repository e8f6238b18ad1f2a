"""Columns as bitmasks: which processors (nodes) a job holds.

The simulator needs only counts, but the live master must name the nodes a
job runs on, so every policy keeps its jobs' columns; a set of columns is one
integer, so "are these free" is one AND, whatever the machine's size.
"""

from collections.abc import Iterable

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
