"""The columns, and the memory, the running jobs of a space-sharing policy hold."""

from dataclasses import dataclass, field

from gangsched.policy.columns import Layout, column_list
from gangsched.policy.memory import MemoryBook, NeedsMemory
from gangsched.policy.topology import Topology


@dataclass
class ColumnBook:
    """The columns held by the running jobs: at its start, each job takes the free ones its topology
    chooses where its memory fits (policy/memory.py)."""

    topology: Topology
    free: int = field(init=False)
    held: dict[int, int] = field(default_factory=dict)  # start order
    memory: MemoryBook = field(init=False)

    def __post_init__(self) -> None:
        self.free = (1 << self.topology.width) - 1
        self.memory = MemoryBook(self.topology)

    def fits(self, job: NeedsMemory) -> bool:
        return self.topology.fits(self.memory.usable(job, self.free), job)

    def take(self, job: NeedsMemory) -> None:
        columns = self.topology.choose(self.memory.usable(job, self.free), job)
        if columns is None:
            raise ValueError(f"job {job.job_id} does not fit the free columns")
        self.hold(job, columns)

    def hold(self, job: NeedsMemory, columns: int) -> None:
        if columns & ~self.free:
            raise ValueError(f"job {job.job_id}: columns {column_list(columns & ~self.free)} are taken")
        self.free &= ~columns
        self.held[job.job_id] = columns
        self.memory.commit(job, columns)

    def give(self, job_id: int) -> None:
        self.free |= self.held.pop(job_id)
        self.memory.release(job_id)

    def layout(self) -> Layout:
        return [dict(self.held)] if self.held else []
