"""The steps of a job: each a launch of tasks over some or all of its allocation's processors.

A job is an allocation (its processors in a matrix row, its memory, its limits, its accounting:
master/job_record.py) that runs steps. Step 0 is the job's own command over every task of the
allocation, what ``gang submit`` runs; a step started in the running job (``StartStep``) runs its
command on the allocation's tasks it names (``slots``). Each step is an MPI world of its own: its
ranks, their exits, its PMI fences, its barrier's port and MASTER_PORT. Every step's tasks are the
job's on their nodes, so the switch that freezes or thaws the job freezes or thaws them all.

The job's life follows its first step: when step 0 ends, the job ends as it did, and the other
steps still running are ended with it. A task of another step that fails ends its step, not the job.
"""

from dataclasses import dataclass, field

from gangsched.protocol.messages import PmiFence
from gangsched.protocol.records import JobSpec, StepSpec

TaskId = tuple[int, int]  # (step, rank): a task of a job


@dataclass(slots=True)
class Step:
    step_id: int
    slots: list[int]  # its rank r runs on the allocation's rank slots[r]
    live_ranks: set[int]  # stored, so that a master that restarts expects no hello to bring an ended rank
    spec: StepSpec | None = None  # what it runs; None: the job's own command (step 0)
    barrier_port: int | None = None
    rendezvous_port: int | None = None  # MASTER_PORT on its rank 0's node
    exit_code: int | None = None  # why it ended, if a task of it failed (step 0's is the job's)
    cpu_ns: int = 0  # what its tasks used, as reported (the job's use is every step's)
    max_rss: int = 0  # bytes: the largest peak of any of its tasks so far
    fences: dict[int, dict[str, PmiFence]] = field(default_factory=dict)  # PMI epoch -> node -> its fence

    def ranks_gone(self, ranks: set[int], exit_code: int | None) -> None:
        """Its ``ranks`` ended; ``exit_code``: why it ended, if one of them failed (the first failure is kept)."""
        self.live_ranks -= ranks
        if exit_code is not None and self.exit_code is None:
            self.exit_code = exit_code

    def measured(self, cpu_ns: int, memory_peak: int) -> None:
        self.cpu_ns += cpu_ns
        if memory_peak > self.max_rss:
            self.max_rss = memory_peak

    def fence_entered(self, fence: PmiFence, nodes: list[str]) -> list[PmiFence] | None:
        """A node's ranks of it entered PMI barrier ``fence.epoch``: once all its ``nodes`` have, their fences in
        that order (the barrier is then over), else None."""
        entered = self.fences.setdefault(fence.epoch, {})
        entered[fence.node] = fence
        if len(entered) < len(nodes):
            return None
        del self.fences[fence.epoch]
        return [entered[node] for node in nodes]

    def node_of(self, rank: int, node_names: list[str]) -> str:
        return node_names[self.slots[rank]]

    def nodes(self, node_names: list[str]) -> list[str]:
        """Its nodes in the order of its ranks, once each."""
        return list(dict.fromkeys(node_names[slot] for slot in self.slots))


def first_step(spec: JobSpec, tasks: int, barrier_port: int | None, rendezvous_port: int | None) -> Step:
    """Step 0: the job's own command, on every task of its allocation; a batch job's script (sbatch) on its
    first alone, the batch step."""
    ranks = 1 if spec.script is not None else tasks
    return Step(0, list(range(ranks)), set(range(ranks)), None, barrier_port, rendezvous_port)
