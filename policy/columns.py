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
    # the fewest low bits of ``mask`` that hold ``count`` columns, found by halving: as many
    # steps as the machine's width has bits, not one per column as taking them one by one
    low, high = count, mask.bit_length()
    while low < high:
        middle = (low + high) // 2
        if (mask & ((1 << middle) - 1)).bit_count() >= count:
            high = middle
        else:
            low = middle + 1
    return mask & ((1 << low) - 1)


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
