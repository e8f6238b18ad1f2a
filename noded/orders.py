"""What the node's core orders its mechanism to do (noded/executor.py carries the orders out).

An order names a task by its key, never by a process.
"""

from dataclasses import dataclass

from gangsched.noded.task_record import TaskKey
from gangsched.protocol.messages import Message, NodeWelcome, PmiFenceDone, PmixModexReply, PmixModexRequest
from gangsched.protocol.records import TaskSpec


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
class Deliver:
    """A user's signal to the task: to every process of it (``whole``) or to its first alone."""

    key: TaskKey
    signal: int
    whole: bool


@dataclass(frozen=True, slots=True)
class CatchNewProcesses:
    """Take in the processes a stopped task started since the last look, up to ``attempts`` looks while
    each finds new ones; ``StillForking`` says if the last one did."""

    key: TaskKey
    attempts: int


@dataclass(frozen=True, slots=True)
class ReapStrays:
    """Reap what ended tasks left; ``live``: the tasks that still run."""

    live: frozenset[TaskKey]


@dataclass(frozen=True, slots=True)
class ReadMemory:
    """Read the memory of these tasks (their peaks, and whether one passed its limit): ``MemoryRead`` each."""

    tasks: frozenset[TaskKey]


@dataclass(frozen=True, slots=True)
class CheckDescheduled:
    """Look at these descheduled tasks, where they are watched rather than frozen: stop again each that ran
    since its stop (``Escaped``)."""

    tasks: frozenset[TaskKey]


@dataclass(frozen=True, slots=True)
class Connect:
    """Follow the endpoints a welcome names (the master's or a relay's), and relay if it says so; then send
    ``then`` on the report route (what waits for the master there: fences, exits a hello had no room for)."""

    welcome: NodeWelcome
    then: tuple[Message, ...] = ()


@dataclass(frozen=True, slots=True)
class UseMaster:
    """Send to this master from now on (another of the masters the node was given)."""

    endpoint: str


ProcessManagerMessage = PmiFenceDone | PmixModexRequest | PmixModexReply


@dataclass(frozen=True, slots=True)
class ToProcessManager:
    """Hand a job's process-manager interface what the master sent for it: a fence's answer, or a
    direct-modex request or reply."""

    message: ProcessManagerMessage


Order = (Launch | Terminate | Kill | Checkpoint | Deliver | CatchNewProcesses | ReapStrays | ReadMemory
         | CheckDescheduled | Connect | UseMaster | ToProcessManager)
