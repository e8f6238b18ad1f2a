"""A policy watched after every scheduling event: no node is ever committed beyond its memory.

The audit does not trust the policy's own book (policy/memory.py): it reads
the layout the policy reports, adds up each placed job's request on each node
its columns touch, and compares that with the node's memory.
"""

from collections.abc import Iterable
from dataclasses import dataclass, field

from gangsched.policy.columns import column_list
from gangsched.policy.interface import Decision, Job, LivePolicy, TimeSharing
from gangsched.policy.memory import MemoryRequest
from gangsched.policy.topology import Topology


class Overcommitted(AssertionError):
    pass


def commitments(topology: Topology, placed: Iterable[tuple[MemoryRequest, int]]) -> list[int]:
    """Per node, the bytes the jobs (their request, their columns) commit there."""
    node_of = [node for node, mask in enumerate(topology.node_columns) for _ in range(mask.bit_count())]
    committed = [0] * len(topology.node_columns)
    for memory, columns in placed:
        tasks: dict[int, int] = {}
        for column in column_list(columns):
            tasks[node_of[column]] = tasks.get(node_of[column], 0) + 1
        for node, count in tasks.items():
            committed[node] += memory.on_node(count)
    return committed


@dataclass
class MemoryAudit:
    """Wraps a policy; every ``schedule`` is checked, and counted."""

    policy: LivePolicy
    topology: Topology
    events: int = 0
    peak_fraction: float = 0.0  # the most committed of any node at any event, as a fraction of its memory
    _jobs: dict[int, Job] = field(default_factory=dict)
    name: str = field(init=False)

    def __post_init__(self) -> None:
        self.name = self.policy.name

    def submit(self, job: Job, now: float) -> None:
        self._jobs[job.job_id] = job
        self.policy.submit(job, now)

    def finish(self, job: Job, now: float) -> None:
        self.policy.finish(job, now)
        del self._jobs[job.job_id]

    def reorder(self, now: float) -> None:
        self.policy.reorder(now)

    def schedule(self, now: float) -> Decision:
        decision = self.policy.schedule(now)
        self.check(now)
        return decision

    def time_sharing(self) -> TimeSharing | None:
        return self.policy.time_sharing()

    def check(self, now: float) -> None:
        capacity = self.topology.node_memory
        assert capacity is not None, "an audit of a machine without memory"
        columns: dict[int, int] = {}
        for row in self.policy.layout():
            for job_id, held in row.items():
                if columns.setdefault(job_id, held) != held:
                    raise AssertionError(f"at {now}: job {job_id} holds other columns in another row")
        committed = commitments(self.topology, ((self._jobs[job_id].memory, held) for job_id, held in columns.items()))
        self.events += 1
        for node, (used, total) in enumerate(zip(committed, capacity, strict=True)):
            if used > total:
                raise Overcommitted(f"at {now}: node {node} committed {used} bytes of {total}")
            self.peak_fraction = max(self.peak_fraction, used / total if total else 0.0)
