"""The partitions' matrices: each partition is a named set of nodes with an Ousterhout matrix of its
own, its own policy (the ``LiveScheduler`` behind its queue), its own decisions and its own
rotation at its own quantum (docs/policies.md, "Partitions").

The job table, starting, ending and the node events are the cluster's; a job
belongs to the partition its spec names, which the master sets as it accepts
the job. A master run without partitions in its configuration file has one,
``batch``, over every node, with the master's settings.
"""

from collections.abc import Iterator
from dataclasses import dataclass

from gangsched.master.clock import Now
from gangsched.master.decisions import Decisions
from gangsched.master.job_record import Job
from gangsched.master.pending import PendingQueue
from gangsched.master.rotation import SlotRotation
from gangsched.master.settings import MasterSettings
from gangsched.policy.partitions import Partition, PartitionState

BOUNDARY_SLACK_S = 0.0005
STARTING = (PartitionState.UP, PartitionState.DRAIN)  # the states in which a partition starts its jobs


@dataclass
class Matrix:
    """One partition's Ousterhout matrix and what decides it."""

    partition: Partition  # by whose name a switch and a node's column name the matrix
    settings: MasterSettings  # the master's, with the partition's own
    queue: PendingQueue
    decisions: Decisions
    rotation: SlotRotation
    next_boundary: float  # monotonic seconds of its next quantum boundary

    @property
    def name(self) -> str:
        return self.partition.name

    def boundary_passed(self, now: float) -> None:
        """Its boundary was decided at ``now``: the next one a quantum on (a late one does not make the next
        quanta shorter)."""
        quantum = self.settings.quantum_ms / 1000
        self.next_boundary = max(self.next_boundary + quantum, now + quantum / 2)


class Matrices:
    def __init__(self, matrices: list[Matrix]) -> None:
        self.replace(matrices)

    def replace(self, matrices: list[Matrix]) -> None:
        """The partitions of a configuration read again (``gang admin reconfigure``)."""
        self._matrices = matrices
        self._by_name = {matrix.name: matrix for matrix in matrices}
        marked = [matrix for matrix in matrices if matrix.partition.default]
        self.default = (marked or matrices)[0]  # Slurm takes the first when none is marked

    def __iter__(self) -> Iterator[Matrix]:
        return iter(self._matrices)

    def named(self, name: str) -> Matrix | None:
        return self._by_name.get(name)

    def of(self, job: Job) -> Matrix:
        return self._by_name[job.spec.partition or self.default.name]

    def holding(self, node: str) -> list[Matrix]:
        return [matrix for matrix in self._matrices if matrix.partition.holds(node)]

    def named_nodes(self) -> set[str]:
        """The nodes the partitions name (a partition over every node names none)."""
        return {node for matrix in self._matrices for node in matrix.partition.nodes or ()}

    def settle(self, now: Now) -> None:
        """After the events of one message or one tick: each matrix's policy decides if one asks for it; that
        of a partition down or inactive starts nothing (Slurm's partition states)."""
        for matrix in self._matrices:
            self.settle_one(matrix, now)

    def settle_one(self, matrix: Matrix, now: Now) -> None:
        if matrix.partition.state in STARTING:
            matrix.decisions.settle(now)

    def due(self, now: float) -> list[Matrix]:
        """The matrices whose boundary is due at ``now``: those within BOUNDARY_SLACK_S of it too, so that
        boundaries that fall together (100 and 200 ms quanta) go out in one switch, not two."""
        return [matrix for matrix in self._matrices if now + BOUNDARY_SLACK_S >= matrix.next_boundary]

    def next_boundary(self) -> float:
        return min(matrix.next_boundary for matrix in self._matrices)

    def shortest_quantum_ms(self) -> int:
        return min(matrix.settings.quantum_ms for matrix in self._matrices)

    def longest_quantum_ms(self) -> int:
        return max(matrix.settings.quantum_ms for matrix in self._matrices)
