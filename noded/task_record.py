"""What the node's core knows of a task, under the key both the core and the mechanism name it by.

The core decides over ``TaskRecord``s; the mechanism holds the real tasks
(processes, or `gang bench scale`'s emulated ones) under the same ``TaskKey``s.
"""

from dataclasses import dataclass
from typing import NamedTuple


class TaskKey(NamedTuple):
    job_id: int
    rank: int


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
