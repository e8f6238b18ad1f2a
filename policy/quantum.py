"""Which rows run in the next quantum: strict (one row in turn) or paired (two rows).

The batch policy (GS, BGS, ...) decides what is in the rows; the quantum
planner only chooses which rows run. Under paired gang scheduling (Wiseman & Feitelson 2003, §2)
the row whose turn it is runs with a partner whose predicted utilization
complements its own, and jobs of other rows may fill the nodes both rows leave
idle (alternate scheduling). With fair matching the partners are chosen once
per round, after slot homogeneity has regrouped the rows; with best-fit, at
every switch.
"""

from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from typing import Literal, Protocol

from gangsched.policy.columns import Layout
from gangsched.policy.paired import alternates, best_fit_partner, fair_matching, row_utilizations

Matching = Literal["fair", "best-fit"]
Pairing = Literal["strict", "paired"]
Coordination = Literal["gang", "local"]


@dataclass(frozen=True)
class PlanInput:
    """What a planner sees at a quantum boundary."""

    layout: Layout
    predict: Callable[[], Mapping[int, float]]  # each running job's predicted utilization, when asked
    exclusive_jobs: Collection[int]
    columns: int  # the columns of the nodes up
    # slot homogeneity: the layout once the policy regrouped its rows by these predictions
    regroup: Callable[[Mapping[int, float]], Layout]


@dataclass(frozen=True)
class Selection:
    rows: tuple[int, ...]  # the row whose turn it is first, then its partner if any
    alternates: tuple[int, ...] = ()  # jobs of other rows running in idle cells


class QuantumPlanner(Protocol):
    name: str

    def select(self, given: PlanInput) -> Selection: ...


def round_robin(row_count: int, previous: int | None) -> int | None:
    """The row whose turn is next (none when the matrix is empty)."""
    if row_count == 0:
        return None
    return 0 if previous is None else (previous + 1) % row_count


@dataclass
class StrictPlanner:
    name: str = "strict"
    _previous: int | None = None

    def select(self, given: PlanInput) -> Selection:
        self._previous = round_robin(len(given.layout), self._previous)
        return Selection(() if self._previous is None else (self._previous,))


@dataclass
class PairedPlanner:
    matching: Matching = "fair"
    name: str = "paired"
    _previous: int | None = None
    _partners: dict[int, int] = field(default_factory=dict)

    def select(self, given: PlanInput) -> Selection:
        layout = given.layout
        row = round_robin(len(layout), self._previous)
        if row is None:
            self._previous = None
            return Selection(())
        predictions = given.predict()
        if self._previous is None or row <= self._previous:  # a new round begins
            layout = given.regroup(predictions)
            row = 0
            if not layout:
                self._previous = None
                return Selection(())
        utilizations = row_utilizations(layout, predictions)
        exclusive_rows = {
            index for index, jobs in enumerate(layout) if any(job in given.exclusive_jobs for job in jobs)
        }
        if self.matching == "fair":
            if row == 0:
                self._partners = fair_matching(utilizations, exclusive_rows)
            partner = self._partners.get(row)
        else:
            partner = best_fit_partner(row, utilizations, exclusive_rows)
        self._previous = row
        rows = (row,) if partner is None or partner >= len(layout) else (row, partner)
        extra = alternates(layout, rows, given.columns, predictions, given.exclusive_jobs)
        return Selection(rows, tuple(extra))


@dataclass
class EveryRowPlanner:
    """No coordination: every row runs in every quantum, and each node's kernel time-shares
    the tasks placed on it, as on a cluster without gang scheduling ("local scheduling")."""

    name: str = "local"

    def select(self, given: PlanInput) -> Selection:
        return Selection(tuple(range(len(given.layout))))


def planner(pairing: Pairing, matching: Matching, coordination: Coordination = "gang") -> QuantumPlanner:
    if coordination == "local":
        return EveryRowPlanner()
    if pairing == "paired":
        return PairedPlanner(matching)
    return StrictPlanner()
