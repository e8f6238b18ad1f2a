"""Partitions as the policies see them: named sets of nodes, each with its own Ousterhout matrix,
in priority tiers (Slurm's ``PriorityTier``), and what their jobs do when a higher tier needs their
nodes (Slurm's ``PreemptMode``). Plain data shared by the master and the simulator; the settings of
each partition's matrix are its daemon's (the master's) or its run's (the simulator's)."""

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum


class PreemptMode(StrEnum):
    """How a partition's running jobs give way to a job of a higher tier that needs their nodes."""

    SUSPEND = "suspend"  # frozen whole, memory kept, resumed when the higher-tier job ends
    REQUEUE = "requeue"  # killed and queued again, releasing their memory
    CANCEL = "cancel"  # ended
    OFF = "off"  # never: the higher-tier job waits


class PartitionState(StrEnum):
    """Slurm's partition states."""

    UP = "up"  # takes and runs jobs
    DOWN = "down"  # takes jobs, starts none
    DRAIN = "drain"  # takes none, runs what it holds
    INACTIVE = "inactive"  # takes none, starts none


ALL_NODES = "ALL"  # a partition over every node that registers (Slurm's Nodes=ALL)
IMPLICIT_PARTITION = "batch"  # the one partition of a configuration that names none: every node


@dataclass(frozen=True)
class Partition:
    """A partition: its nodes, its tier and what its jobs may do and must give way to; the settings of
    its matrix are the master's (or the simulator run's) with its own."""

    name: str
    nodes: frozenset[str] | None  # None: every node (ALL)
    default: bool = False
    priority_tier: int = 1
    preempt_mode: PreemptMode = PreemptMode.OFF
    max_time_s: float | None = None
    allow_users: frozenset[str] | None = None  # None: every user
    state: PartitionState = PartitionState.UP

    def holds(self, node: str) -> bool:
        return self.nodes is None or node in self.nodes


@dataclass(frozen=True)
class Shared:
    """Two partitions of one tier that name the same nodes."""

    first: str
    second: str
    nodes: tuple[str, ...]


def same_tier_sharing(partitions: Iterable[tuple[str, int, frozenset[str]]]) -> list[Shared]:
    """Of (name, tier, nodes) partitions, each pair of one tier that shares nodes: two matrices of
    one tier over one node would each think its processors their own, so the file is refused."""
    seen: list[tuple[str, int, frozenset[str]]] = []
    found = []
    for name, tier, nodes in partitions:
        for other, other_tier, other_nodes in seen:
            common = nodes & other_nodes
            if tier == other_tier and common:
                found.append(Shared(other, name, tuple(sorted(common))))
        seen.append((name, tier, nodes))
    return found


def preemption_order(lower_gangs: dict[str, list[int]]) -> list[str]:
    """The nodes a higher-tier matrix sees, in the order its policy fills them (the lowest free columns
    first): those where a job of its would preempt the fewest gangs of lower tiers, then the smallest
    (fewest tasks), then by name. ``lower_gangs``: node -> the task counts of the lower-tier gangs running
    there. So a higher-tier job preempts only where its own matrix has no room elsewhere in the row it
    takes, and then the fewest and smallest gangs it can."""
    return sorted(lower_gangs, key=lambda node: (len(lower_gangs[node]), sum(lower_gangs[node]), node))
