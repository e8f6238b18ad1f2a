"""Paired gang scheduling: two complementary rows share a quantum (seed 003 §2, SPEC §3).

* ``pairable`` — rows x and y may share a quantum when
  max_util(x) + max_util(y) + margin < 100 (§2.5, margin 1 %).
* ``fair_matching`` — once per round, pair the rows low with high (Fig. 4,
  reconstructed in SPEC §3.3); a row left over borrows the lowest-utilization
  matched row it is pairable with.
* ``best_fit_partner`` — the unfair alternative kept for comparison: at each
  switch, the pairable row of highest utilization, ties (within ``TIE``) to
  the last scanned.
* ``homogenize`` — slot homogeneity (§2.5): a job whose utilization is M or
  more above its slot's lowest leaves for a slot whose band it fits.
* ``alternates`` — alternate scheduling (§2.6): jobs whose tasks all sit on
  nodes idle in both selected rows, within the running row's band, run too.

Rows holding an exclusive job are never paired. Every function is pure: it
reads the matrix and the predictions and returns a decision.
"""

from collections.abc import Collection, Mapping, Sequence

from gangsched.policy.matrix import Matrix
from gangsched.policy.predictor import ALONE

MARGIN = 1.0
BAND = 20.0
# Best-fit compares utilizations at the resolution ParPar measured them with
# (whole points): finer differences between like jobs are noise, and its rule
# "ties go to the last row scanned" is what makes it unfair (Fig. 7, left).
TIE = 1.0


def row_utilizations(matrix: Matrix, predictions: Mapping[int, float]) -> list[float]:
    """max_util of each row: its most CPU-hungry job's prediction (unknown jobs run alone)."""
    return [
        max((predictions.get(job, ALONE) for job in set(cells.values())), default=0.0)
        for cells in matrix.rows
    ]


def pairable(util_x: float, util_y: float, margin: float = MARGIN) -> bool:
    return util_x + util_y + margin < 100.0


def fair_matching(
    utilizations: Sequence[float], exclusive_rows: Collection[int], margin: float = MARGIN
) -> dict[int, int]:
    """The partner of each row for the coming round."""
    rows = sorted(
        (row for row in range(len(utilizations)) if row not in exclusive_rows),
        key=lambda row: (utilizations[row], row),
    )
    partner: dict[int, int] = {}
    low, high = 0, len(rows) - 1
    while low < high:
        x, y = rows[low], rows[high]
        if pairable(utilizations[x], utilizations[y], margin):
            partner[x], partner[y] = y, x
            low += 1
        high -= 1  # matched, or too hungry to fit with any row still unmatched
    matched = [row for row in rows if row in partner]
    for row in rows:
        if row not in partner:
            borrowed = next(
                (q for q in matched if pairable(utilizations[row], utilizations[q], margin)), None
            )
            if borrowed is not None:
                partner[row] = borrowed  # the borrowed row keeps its own partner
    return partner


def best_fit_partner(
    row: int, utilizations: Sequence[float], exclusive_rows: Collection[int], margin: float = MARGIN
) -> int | None:
    if row in exclusive_rows:
        return None
    best: int | None = None
    for other, utilization in enumerate(utilizations):
        if other == row or other in exclusive_rows:
            continue
        if pairable(utilizations[row], utilization, margin) and (
            best is None or utilization >= utilizations[best] - TIE
        ):
            best = other
    return best


def homogenize(
    matrix: Matrix, predictions: Mapping[int, float], nodes: Sequence[str], mpl: int, band: float = BAND
) -> list[tuple[int, int, int]]:
    """Move jobs out of slots whose band they break; returns (job, from row, to row) moves.

    A job keeps its nodes: it moves to the first other row where they are free
    and its utilization is within ``band`` of every job there, else to a new
    row while the MPL allows, else it stays.
    """
    moves: list[tuple[int, int, int]] = []
    for row in range(len(matrix.rows)):
        for job in _band_breakers(matrix.rows[row], predictions, band):
            job_nodes = matrix.nodes_of(job)
            target = next(
                (other for other in range(len(matrix.rows))
                 if other != row
                 and len(matrix.free_nodes(other, job_nodes)) == len(job_nodes)
                 and _within_band(matrix.rows[other], predictions, predictions.get(job, ALONE), band)),
                len(matrix.rows) if len(matrix.rows) < mpl else None,
            )
            if target is None:
                continue
            for node in job_nodes:
                del matrix.rows[row][node]
            matrix.place(job, target, job_nodes)
            moves.append((job, row, target))
    matrix.rows = [cells for cells in matrix.rows if cells]
    return moves


def alternates(
    matrix: Matrix,
    selected: Sequence[int],
    nodes: Sequence[str],
    predictions: Mapping[int, float],
    exclusive_jobs: Collection[int],
    band: float = BAND,
) -> list[int]:
    """Jobs of other rows that may also run on the nodes both selected rows leave idle."""
    busy = {node for row in selected for node in matrix.rows[row]}
    idle = set(nodes) - busy
    if not selected or not idle:  # the usual quantum on the switch path: nothing to fill
        return []
    running = matrix.rows[selected[0]]
    already = {job for row in selected for job in matrix.rows[row].values()}
    chosen: list[int] = []
    for job in matrix.jobs():
        if job in exclusive_jobs or job in already:
            continue
        job_nodes = set(matrix.nodes_of(job))
        if job_nodes <= idle and _within_band(running, predictions, predictions.get(job, ALONE), band):
            chosen.append(job)
            idle -= job_nodes
    return chosen


def _band_breakers(cells: Mapping[str, int], predictions: Mapping[int, float], band: float) -> list[int]:
    jobs = sorted(set(cells.values()))
    if len(jobs) < 2:
        return []
    lowest = min(predictions.get(job, ALONE) for job in jobs)
    return [job for job in jobs if predictions.get(job, ALONE) >= lowest + band]


def _within_band(
    cells: Mapping[str, int], predictions: Mapping[int, float], utilization: float, band: float
) -> bool:
    others = [predictions.get(job, ALONE) for job in set(cells.values())]
    return all(abs(utilization - other) < band for other in others)
