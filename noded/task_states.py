"""What the node's core knows of a task, and what it orders its loop to do to tasks.

The core decides over ``TaskState`` records, keyed by (job id, rank); the loop holds the
real tasks (processes, or `gang bench scale`'s emulated ones) under the same keys and
carries out the orders. An order names a task by its key, never by a process.
"""

from dataclasses import dataclass

from gangsched.protocol.messages import NodeWelcome, PmiFenceDone, PmixModexReply, PmixModexRequest
from gangsched.protocol.records import TaskSpec

TaskKey = tuple[int, int]  # (job id, rank)


@dataclass(slots=True, eq=False)
class TaskState:
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


@dataclass(frozen=True, slots=True)
class Launch:
    spec: TaskSpec
    runnable: bool  # start it running, or stopped: what the switch in force says of its job


@dataclass(frozen=True, slots=True)
class Terminate:
    """SIGTERM every process of the task (continued, so it can handle it); a ``Kill`` follows after the grace."""

    key: TaskKey


@dataclass(frozen=True, slots=True)
class Kill:
    key: TaskKey


@dataclass(frozen=True, slots=True)
class Checkpoint:
    key: TaskKey


@dataclass(frozen=True, slots=True)
class Look:
    """Take in the processes a stopped task started since the last look, up to ``attempts`` times
    while each look finds new ones; the loop tells the core (``still_forking``) if the last one did."""

    key: TaskKey
    attempts: int


@dataclass(frozen=True, slots=True)
class Sweep:
    """Reap what ended tasks left; ``live``: the tasks that still run."""

    live: frozenset[TaskKey]


@dataclass(frozen=True, slots=True)
class ReadMemory:
    """Read the memory of these tasks (their peaks, and whether one passed its limit), and tell the core."""

    tasks: frozenset[TaskKey]


@dataclass(frozen=True, slots=True)
class Watch:
    """Look at these descheduled tasks: stop again each that ran since its stop, and tell the core."""

    tasks: frozenset[TaskKey]


@dataclass(frozen=True, slots=True)
class Connect:
    """Follow the endpoints a welcome names (the master's or a relay's), and relay if it says so."""

    welcome: NodeWelcome


ProcessManagerMessage = PmiFenceDone | PmixModexRequest | PmixModexReply


@dataclass(frozen=True, slots=True)
class ToProcessManager:
    """Hand a job's process-manager interface what the master sent for it: a fence's answer, or a
    direct-modex request or reply."""

    message: ProcessManagerMessage


Order = Launch | Terminate | Kill | Checkpoint | Look | Sweep | ReadMemory | Watch | Connect | ToProcessManager
