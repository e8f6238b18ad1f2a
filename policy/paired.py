"""Paired gang scheduling: two complementary rows share a quantum (Wiseman & Feitelson 2003, §2).

* ``pairable`` — rows x and y may share a quantum when
  max_util(x) + max_util(y) + margin < 100 (§2.5, margin 1 %).
* ``fair_matching`` — once per round, pair the rows low with high (Fig. 4,
  reconstructed from the text; docs/policies.md); a row left over borrows the lowest-utilization
  matched row it is pairable with.
* ``best_fit_partner`` — the unfair alternative kept for comparison: at each
  switch, the pairable row of highest utilization, ties (within ``TIE``) to
  the last scanned.
* ``band_breakers`` and ``within_band`` — slot homogeneity (§2.5): a job whose
  utilization is M or more above its slot's lowest leaves for a slot whose band
  it fits (``MatrixPolicy.homogenize``: the matrix policy owns the rows).
* ``alternates`` — alternate scheduling (§2.6): jobs whose tasks all sit on
  nodes idle in both selected rows, within the running row's band, run too.

Rows holding an exclusive job are never paired. Every function is pure: it
reads the layout of the rows and the predictions and returns a decision.
"""

from collections.abc import Collection, Iterable, Mapping, Sequence

from gangsched.policy.columns import Layout
from gangsched.policy.predictor import ALONE

MARGIN = 1.0
BAND = 20.0
# Best-fit compares utilizations at the resolution ParPar measured them with
# (whole points): finer differences between like jobs are noise, and its rule
# "ties go to the last row scanned" is what makes it unfair (Fig. 7, left).
TIE = 1.0


def row_utilizations(layout: Layout, predictions: Mapping[int, float]) -> list[float]:
    """max_util of each row: its most CPU-hungry job's prediction (unknown jobs run alone)."""
    return [max((predictions.get(job, ALONE) for job in row), default=0.0) for row in layout]


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


def alternates(
    layout: Layout,
    selected: Sequence[int],
    columns: int,
    predictions: Mapping[int, float],
    exclusive_jobs: Collection[int],
    band: float = BAND,
) -> list[int]:
    """Jobs of other rows that may also run on the ``columns`` both selected rows leave idle."""
    busy = 0
    for row in selected:
        for held in layout[row].values():
            busy |= held
    idle = columns & ~busy
    if not selected or not idle:  # the usual quantum on the switch path: nothing to fill
        return []
    running = layout[selected[0]]
    already = {job for row in selected for job in layout[row]}
    others = {job: held for row in layout for job, held in row.items() if job not in already}
    chosen: list[int] = []
    for job in sorted(others):
        held = others[job]
        if job not in exclusive_jobs and not held & ~idle and within_band(
            running, predictions, predictions.get(job, ALONE), band
        ):
            chosen.append(job)
            idle &= ~held
    return chosen


def band_breakers(jobs: Iterable[int], predictions: Mapping[int, float], band: float = BAND) -> list[int]:
    """The jobs of one row whose utilization is ``band`` or more above the row's lowest."""
    jobs = sorted(jobs)
    if len(jobs) < 2:
        return []
    lowest = min(predictions.get(job, ALONE) for job in jobs)
    return [job for job in jobs if predictions.get(job, ALONE) >= lowest + band]


def within_band(
    jobs: Iterable[int], predictions: Mapping[int, float], utilization: float, band: float = BAND
) -> bool:
    return all(abs(utilization - predictions.get(job, ALONE)) < band for job in jobs)
