"""What the node's mechanism reports about its tasks, for the loop to feed to the core
(``NodeCore.task_event``): the mechanism never calls the core.

Each is the outcome of carrying out an order, of a task's exit, or of what a
process-manager interface served.
"""

from dataclasses import dataclass

from gangsched.noded.task_record import MemoryReading, TaskKey
from gangsched.protocol.messages import PmiFence, PmixModexReply, PmixModexRequest


@dataclass(frozen=True, slots=True)
class Launched:
    """A task ``Launch`` asked for started, running or stopped as it asked, at ``started_ns`` (monotonic)."""

    key: TaskKey
    runnable: bool
    started_ns: int


@dataclass(frozen=True, slots=True)
class NotStarted:
    key: TaskKey
    reason: str  # its job fails with it


@dataclass(frozen=True, slots=True)
class Exited:
    """A task ended and was reaped: its last readings."""

    key: TaskKey
    returncode: int
    error: str | None  # why it failed, where its status does not say (its process manager, its launch)
    cpu_ns: int  # since the last sample
    progress: int
    memory: MemoryReading


@dataclass(frozen=True, slots=True)
class Escaped:
    """A look found a descheduled task running, and stopped it again."""

    key: TaskKey


@dataclass(frozen=True, slots=True)
class MemoryRead:
    key: TaskKey
    reading: MemoryReading


@dataclass(frozen=True, slots=True)
class StillForking:
    """Every look of a ``CatchNewProcesses`` found new processes."""

    key: TaskKey


@dataclass(frozen=True, slots=True)
class ForMaster:
    """A process-manager interface sends the master this: a fence of a job's ranks here, or a direct-modex
    request or reply."""

    message: PmiFence | PmixModexRequest | PmixModexReply


@dataclass(frozen=True, slots=True)
class Failed:
    """The task's job failed (its ``failure`` says why: its process-manager interface failed it, or it gave
    a value beyond what it may): it is ended."""

    key: TaskKey


TaskEvent = Launched | NotStarted | Exited | Escaped | MemoryRead | StillForking | ForMaster | Failed
