"""What the node's core knows of a task, under the key both the core and the mechanism name it by.

The core decides over ``TaskRecord``s; the mechanism holds the real tasks
(processes, or `gang bench scale`'s emulated ones) under the same ``TaskKey``s.
"""

from dataclasses import dataclass
from typing import NamedTuple, Protocol

from gangsched.protocol.records import step_name


class _OfAStep(Protocol):
    @property
    def job_id(self) -> int: ...
    @property
    def step(self) -> int: ...


class _OfATask(_OfAStep, Protocol):
    @property
    def rank(self) -> int: ...


class World(NamedTuple):
    """A step of a job: its tasks are one MPI world (a key-value space, its fences), as each Slurm step is."""

    job_id: int
    step: int

    @classmethod
    def of(cls, task: _OfAStep) -> "World":
        return cls(task.job_id, task.step)

    @property
    def name(self) -> str:
        """Its files' stem on the node."""
        return step_name(self.job_id, self.step)

    def __str__(self) -> str:
        return f"job {self.job_id}" + (f" step {self.step}" if self.step else "")


class TaskKey(NamedTuple):
    """A task: rank ``rank`` of step ``step`` of job ``job_id``."""

    job_id: int
    step: int
    rank: int

    @classmethod
    def of(cls, task: _OfATask) -> "TaskKey":
        """The key of what names a task (its spec, its exit, its acknowledgement)."""
        return cls(task.job_id, task.step, task.rank)

    @property
    def world(self) -> World:
        return World(self.job_id, self.step)

    @property
    def name(self) -> str:
        """Its files' stem on the node: ``job-J.R`` for the job's first step (as before steps), ``job-J.S.R``."""
        return f"{self.world.name}.{self.rank}"

    def __str__(self) -> str:
        return f"job {self.job_id} rank {self.rank}" + (f" of step {self.step}" if self.step else "")


@dataclass(slots=True, eq=False)
class TaskRecord:
    key: TaskKey
    runnable: bool  # as last applied (signalled), not as desired
    runnable_since_ns: int  # monotonic; when its current runnable stretch was last sampled
    ending: bool = False  # sent SIGTERM; killed at its deadline
    checkpointing: bool = False
    memory_peak: int = 0  # bytes, as last read (every heartbeat)
    out_of_memory: bool = False  # it passed its memory limit: killed, and its job ends OUT_OF_MEMORY
    escapes: int = 0  # looks that found it running while descheduled, in this stretch (noded/enforcement.py)
    escaped_stretches: int = 0  # bits, newest lowest: which of its last descheduled stretches it escaped in
    violation: str | None = None  # why the node ended it, which its exit carries

    @property
    def leaving(self) -> bool:
        """Ending or migrating: it runs, whatever the switches say, until it exits."""
        return self.ending or self.checkpointing


@dataclass(frozen=True, slots=True)
class MemoryReading:
    """A task's memory as the node read it (noded/memory.py)."""

    peak: int  # bytes: the most the task held at once, as far as seen
    out_of_memory: bool  # it passed its limit (the kernel killed a process of it, or a reading found it over)
