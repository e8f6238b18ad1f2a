"""Strict gang scheduling: placing jobs in the matrix and choosing the row to run.

``schedule`` is the Schedule phase of seed 000 (§3, SPEC §4 step 3) for plain
GS: walk the queue in priority order and put each job in the row with the
fewest free columns that still holds it (best fit), opening a new row while
the MPL allows; plain GS stops at the first job that does not fit.
``round_robin`` is the strict policy of seed 003 §2.1: one row per quantum,
in turn.

Invariants: no cell holds two jobs; a job keeps the same nodes in every row.
"""

from collections.abc import Sequence
from dataclasses import dataclass

from gangsched.policy.matrix import Matrix


@dataclass(frozen=True)
class Request:
    """A queued job as the policy sees it."""

    job_id: int
    width: int


@dataclass(frozen=True)
class Placement:
    job_id: int
    row: int
    nodes: tuple[str, ...]


def never_fits(width: int, cluster_size: int) -> str | None:
    """Why a job can never run on this cluster, or None if it may some day."""
    if width > cluster_size:
        return f"needs {width} nodes, the cluster has {cluster_size}"
    return None


def schedule(
    matrix: Matrix, queue: Sequence[Request], nodes: Sequence[str], mpl: int
) -> list[Placement]:
    """Place queued jobs in order until one does not fit; applies them to ``matrix``.

    ``nodes`` are the nodes that may take tasks now, in the order columns are
    filled. Returns the placements made, in queue order.
    """
    placements: list[Placement] = []
    for request in queue:
        placement = _best_fit(matrix, request, nodes, mpl)
        if placement is None:
            break
        matrix.place(placement.job_id, placement.row, placement.nodes)
        placements.append(placement)
    return placements


def _best_fit(
    matrix: Matrix, request: Request, nodes: Sequence[str], mpl: int
) -> Placement | None:
    # existing rows first, then a new one: a new row is never fuller, so it
    # only wins when no existing row holds the job; ties keep the earlier row
    candidates = list(range(len(matrix.rows)))
    if len(matrix.rows) < mpl:
        candidates.append(len(matrix.rows))
    best: Placement | None = None
    best_free = len(nodes) + 1
    for row in candidates:
        free = matrix.free_nodes(row, nodes)
        if request.width <= len(free) < best_free:
            best = Placement(request.job_id, row, tuple(free[: request.width]))
            best_free = len(free)
    return best


def round_robin(row_count: int, previous: int | None) -> tuple[int, ...]:
    """The row to run next under strict gang scheduling (none when the matrix is empty)."""
    if row_count == 0:
        return ()
    if previous is None:
        return (0,)
    return ((previous + 1) % row_count,)
