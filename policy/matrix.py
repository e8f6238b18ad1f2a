"""The Ousterhout matrix: rows are time slots, columns are nodes.

A cell holds the task of one job. A job occupies the same nodes in every row
it appears in, so its columns are a property of the job, not of the row.
Rows are kept in order and an emptied row is dropped.
"""

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field


@dataclass
class Matrix:
    rows: list[dict[str, int]] = field(default_factory=list)  # row -> node -> job id

    def place(self, job_id: int, row: int, nodes: Sequence[str]) -> None:
        """Put the job in ``row`` on ``nodes``; ``row == len(rows)`` opens a new row."""
        if row == len(self.rows):
            self.rows.append({})
        cells = self.rows[row]
        taken = [node for node in nodes if node in cells]
        if taken:
            raise ValueError(f"job {job_id}: row {row} is taken on {taken}")
        for node in nodes:
            cells[node] = job_id

    def remove(self, job_id: int) -> None:
        """Take the job out of every row; rows left empty are dropped."""
        for cells in self.rows:
            for node in [node for node, job in cells.items() if job == job_id]:
                del cells[node]
        self.rows = [cells for cells in self.rows if cells]

    def rows_of(self, job_id: int) -> list[int]:
        return [index for index, cells in enumerate(self.rows) if job_id in cells.values()]

    def nodes_of(self, job_id: int) -> list[str]:
        for cells in self.rows:
            nodes = [node for node, job in cells.items() if job == job_id]
            if nodes:
                return sorted(nodes)
        return []

    def jobs(self) -> list[int]:
        return sorted({job for cells in self.rows for job in cells.values()})

    def free_nodes(self, row: int, nodes: Iterable[str]) -> list[str]:
        cells = self.rows[row] if row < len(self.rows) else {}
        return [node for node in nodes if node not in cells]

    def runnable(self, rows: Iterable[int], nodes: Iterable[str]) -> dict[str, list[int]]:
        """For every node, the jobs whose tasks run when ``rows`` are selected."""
        selected = [self.rows[row] for row in rows]
        return {
            node: sorted({cells[node] for cells in selected if node in cells}) for node in nodes
        }

    def table(self, nodes: Sequence[str]) -> list[list[int | None]]:
        return [[cells.get(node) for node in nodes] for cells in self.rows]
