"""Which rows run in the next quantum: strict (one row in turn) or paired (two rows).

Under paired gang scheduling (seed 003 §2) the row whose turn it is runs with
a partner whose predicted utilization complements its own, and jobs of other
rows may fill the nodes both rows leave idle (alternate scheduling). With
fair matching the partners are chosen once per round, after slot homogeneity
has moved jobs that break their slot's band; with best-fit, at every switch.
"""

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gangsched.policy.gang import round_robin
from gangsched.policy.matrix import Matrix
from gangsched.policy.paired import (
    alternates,
    best_fit_partner,
    fair_matching,
    homogenize,
    row_utilizations,
)

Matching = Literal["fair", "best-fit"]


@dataclass(frozen=True)
class PlanInput:
    """What a planner sees at a quantum boundary."""

    matrix: Matrix  # homogenize may move jobs between its rows
    predictions: Mapping[int, float]  # predicted utilization of each running job
    exclusive_jobs: Collection[int]
    nodes: Sequence[str]  # the nodes up
    mpl: int


@dataclass(frozen=True)
class Selection:
    rows: tuple[int, ...]  # the row whose turn it is first, then its partner if any
    alternates: tuple[int, ...] = ()  # jobs of other rows running in idle cells


class QuantumPlanner(Protocol):
    name: str

    def select(self, given: PlanInput) -> Selection: ...


@dataclass
class StrictPlanner:
    name: str = "strict"
    _previous: int | None = None

    def select(self, given: PlanInput) -> Selection:
        rows = round_robin(len(given.matrix.rows), self._previous)
        self._previous = rows[0] if rows else None
        return Selection(rows)


@dataclass
class PairedPlanner:
    matching: Matching = "fair"
    name: str = "paired"
    _previous: int | None = None
    _partners: dict[int, int] = field(default_factory=dict)

    def select(self, given: PlanInput) -> Selection:
        matrix, predictions = given.matrix, given.predictions
        turn = round_robin(len(matrix.rows), self._previous)
        if not turn:
            self._previous = None
            return Selection(())
        (row,) = turn
        if self._previous is None or row <= self._previous:  # a new round begins
            homogenize(matrix, predictions, given.nodes, given.mpl)
            row = 0
        utilizations = row_utilizations(matrix, predictions)
        exclusive_rows = {
            index for index, cells in enumerate(matrix.rows)
            if any(job in given.exclusive_jobs for job in cells.values())
        }
        if self.matching == "fair":
            if row == 0:
                self._partners = fair_matching(utilizations, exclusive_rows)
            partner = self._partners.get(row)
        else:
            partner = best_fit_partner(row, utilizations, exclusive_rows)
        self._previous = row
        rows = (row,) if partner is None or partner >= len(matrix.rows) else (row, partner)
        extra = alternates(matrix, rows, given.nodes, predictions, given.exclusive_jobs)
        return Selection(rows, tuple(extra))


def planner(policy: str, matching: Matching) -> QuantumPlanner:
    if policy == "paired":
        return PairedPlanner(matching)
    return StrictPlanner()
