"""The columns the running jobs of a space-sharing policy hold."""

from dataclasses import dataclass, field

from gangsched.policy.columns import Layout, column_list
from gangsched.policy.topology import Shaped, Topology


@dataclass
class ColumnBook:
    """The columns held by the running jobs: at its start, each job takes the free ones its topology chooses."""

    topology: Topology
    free: int = field(init=False)
    held: dict[int, int] = field(default_factory=dict)  # start order

    def __post_init__(self) -> None:
        self.free = (1 << self.topology.width) - 1

    def fits(self, job: Shaped) -> bool:
        return self.topology.fits(self.free, job)

    def take(self, job_id: int, job: Shaped) -> None:
        columns = self.topology.choose(self.free, job)
        if columns is None:
            raise ValueError(f"job {job_id} does not fit the free columns")
        self.hold(job_id, columns)

    def hold(self, job_id: int, columns: int) -> None:
        if columns & ~self.free:
            raise ValueError(f"job {job_id}: columns {column_list(columns & ~self.free)} are taken")
        self.free &= ~columns
        self.held[job_id] = columns

    def give(self, job_id: int) -> None:
        self.free |= self.held.pop(job_id)

    def layout(self) -> Layout:
        return [dict(self.held)] if self.held else []
