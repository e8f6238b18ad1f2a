"""What a tentative collapse of the matrix may change, to put back if a row cannot be emptied
whole (CollapseMatrix moves a row's jobs one by one: Zhang et al. 2000; docs/policies.md)."""

import dataclasses
from dataclasses import dataclass

from gangsched.policy.matrix_settings import MatrixStats
from gangsched.policy.memory import MemoryBook
from gangsched.policy.migration import Event
from gangsched.policy.ousterhout import OusterhoutMatrix, Placed, Row
from gangsched.policy.profile import Profile


@dataclass
class CollapseUndo:
    rows: list[tuple[Row, int, dict[int, Placed], Profile]]
    jobs: list[tuple[Placed, int, Row]]
    memory: MemoryBook
    budget: float
    extra_work: dict[int, float]
    stats: MatrixStats

    @classmethod
    def of(cls, matrix: OusterhoutMatrix, event: Event, stats: MatrixStats) -> "CollapseUndo":
        return cls([(row, row.occupied, dict(row.homes), row.profile.copy()) for row in matrix.rows],
                   [(placed, placed.columns, placed.home) for placed in matrix.placed.values()],
                   matrix.memory.copy(), event.budget, dict(event.extra_work), dataclasses.replace(stats))

    def restore(self, matrix: OusterhoutMatrix, event: Event) -> MatrixStats:
        """Put the matrix and the event back as they were; the policy's statistics as they were."""
        for row, occupied, homes, profile in self.rows:
            row.occupied, row.homes, row.profile = occupied, homes, profile
        for placed, columns, home in self.jobs:
            placed.columns, placed.home = columns, home
        matrix.memory.restore(self.memory)
        event.budget, event.extra_work = self.budget, self.extra_work
        return self.stats
