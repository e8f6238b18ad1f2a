"""The queue for large jobs (Zhou & Brent 2001; docs/policies.md): which processors a large
job may still take, and when enough of them will be open for the head of the queue."""

import math
from dataclasses import dataclass

from gangsched.policy.interface import Job
from gangsched.policy.ousterhout import OusterhoutMatrix, Placed


@dataclass(frozen=True)
class LargeJobs:
    threshold_s: float  # α · t_max: an estimate above it makes a job large
    most_sharing: int = 2  # j_max: large jobs sharing any one processor at most
    backfill: bool = False

    def running(self, matrix: OusterhoutMatrix) -> list[Placed]:
        return [placed for placed in matrix.placed.values() if placed.job.estimate > self.threshold_s]

    def saturated(self, matrix: OusterhoutMatrix, ending: frozenset[int] = frozenset()) -> int:
        """The columns already shared by j_max large jobs (ignoring those ``ending``)."""
        covered = [0] * self.most_sharing  # covered[i]: columns under more than i large jobs
        for placed in self.running(matrix):
            if placed.job.job_id in ending:
                continue
            for level in range(self.most_sharing - 1, 0, -1):
                covered[level] |= covered[level - 1] & placed.columns
            covered[0] |= placed.columns
        return covered[-1]

    def shadow(self, matrix: OusterhoutMatrix, head: Job) -> float:
        """When enough columns will be open to large jobs for the head, by the estimated ends."""
        ending: set[int] = set()
        for placed in sorted(self.running(matrix), key=lambda placed: placed.estimated_end):
            ending.add(placed.job.job_id)
            open_columns = matrix.full & ~self.saturated(matrix, frozenset(ending))
            if open_columns.bit_count() >= head.procs:
                return placed.estimated_end
        return math.inf
