"""Which processors make up each node, and where a job's tasks may go on them.

A policy's columns are processors. Numbered node by node (node 0's
processors first), the lowest free columns pack a job's tasks onto as few
nodes as possible, and ranks in column order are consecutive on each node:
Slurm's block distribution. A job may also ask for its tasks on exactly
``nodes`` nodes and at most ``tasks_per_node`` on each (Slurm's ``-N`` and
``--ntasks-per-node``); then only a choice of whole nodes with enough free
processors fits. A task of several processors (Slurm's ``-c``) takes them all
on one node: a job's columns on each node are a multiple of them. Columns
may be closed to new placements (a drained node's: its running jobs keep
theirs, no job is placed or moved there), and closed
to some jobs for some time (a reservation's: policy/windows.py). The
simulator's machines have one processor per node, where every shape is just
a count. A topology may also declare each node's memory
(bytes), which policy/memory.py counts; without it memory is not counted.
"""

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Protocol

from gangsched.policy.columns import lowest_columns
from gangsched.policy.windows import Windows


class Shaped(Protocol):
    job_id: int
    procs: int  # processors: its tasks times cpus_per_task
    nodes: int | None  # exactly this many nodes
    tasks_per_node: int | None  # at most this many tasks on each
    cpus_per_task: int  # each task's processors, all on one node
    estimate: float  # its time limit: what reservations judge it by (policy/windows.py)


def per_node_counts(tasks: int, nodes: int | None, tasks_per_node: int | None) -> list[int] | None:
    """How many tasks each node of the job runs, largest first; None: any processors will do."""
    if nodes is None and tasks_per_node is None:
        return None
    if nodes is None:
        assert tasks_per_node is not None
        full, rest = divmod(tasks, tasks_per_node)
        return [tasks_per_node] * full + ([rest] if rest else [])
    base, extra = divmod(tasks, nodes)
    return [base + 1] * extra + [base] * (nodes - extra)


@dataclass(frozen=True)
class Topology:
    node_columns: tuple[int, ...]  # per node, the mask of its processors' columns
    node_memory: tuple[int, ...] | None = None  # per node, its memory in bytes; None: not counted
    closed: int = 0  # the columns no job may be placed on or moved to (drained nodes')
    windows: Windows | None = field(default=None, compare=False)  # reservations: columns closed to some jobs

    @classmethod
    def uniform(cls, nodes: int, processors: int = 1, memory: int | None = None) -> "Topology":
        return cls.of([processors] * nodes, None if memory is None else [memory] * nodes)

    @classmethod
    def of(cls, processors: Sequence[int], memory: Sequence[int] | None = None) -> "Topology":
        """Nodes with these numbers of processors (and bytes of memory), numbered in that order."""
        masks, first = [], 0
        for count in processors:
            masks.append(((1 << count) - 1) << first)
            first += count
        return cls(tuple(masks), None if memory is None else tuple(memory))

    @property
    def width(self) -> int:
        return sum(mask.bit_count() for mask in self.node_columns)

    def choose(self, free: int, job: Shaped) -> int | None:
        """The columns ``job`` takes out of ``free``, or None if it does not fit there."""
        if self.closed or self.windows is not None:
            free = self.open_to(job, free)
        if free.bit_count() < job.procs:
            return None
        grain = job.cpus_per_task
        counts = per_node_counts(job.procs // grain, job.nodes, job.tasks_per_node)
        if counts is None:
            return lowest_columns(free, job.procs) if grain == 1 else self._packed(free, job.procs, grain)
        # largest demand first, each to the lowest node that still holds it: a node that holds
        # a demand holds every smaller one, so this finds a placement whenever there is one
        chosen, used = 0, set()
        for count in counts:
            node = next((index for index, mask in enumerate(self.node_columns)
                         if index not in used and (free & mask).bit_count() >= count * grain), None)
            if node is None:
                return None
            used.add(node)
            chosen |= lowest_columns(free & self.node_columns[node], count * grain)
        return chosen

    def _packed(self, free: int, procs: int, grain: int) -> int | None:
        """``procs`` columns of ``free`` in whole tasks of ``grain`` each, node by node from the lowest."""
        chosen, wanted = 0, procs
        for mask in self.node_columns:
            take = min(wanted, (free & mask).bit_count() // grain * grain)
            if take:
                chosen |= lowest_columns(free & mask, take)
                wanted -= take
                if not wanted:
                    return chosen
        return None

    def fits(self, free: int, job: Shaped) -> bool:
        if job.nodes is None and job.tasks_per_node is None and job.cpus_per_task == 1:  # a count: the simulator's
            if self.closed or self.windows is not None:
                free = self.open_to(job, free)
            return free.bit_count() >= job.procs
        return self.choose(free, job) is not None

    def open_to(self, job: Shaped, free: int) -> int:
        """The columns of ``free`` that ``job`` may take: not closed, not held by a window against it."""
        free &= ~self.closed
        return free if self.windows is None else free & ~self.windows.closed_to(job, free)

    def without_windows(self) -> "Topology":
        """The same nodes with no reservation's window: what a job could have once they are over."""
        return Topology(self.node_columns, self.node_memory, self.closed)
