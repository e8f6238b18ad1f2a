"""The one interface every process-manager interface of a node daemon has (Slurm's ``--mpi`` plug-ins).

A ``ProcessManager`` prepares a task's environment and descriptors before it
starts (``prepare``), serves it once it runs (``attach``, and the descriptors it
watches), takes what the master sends for its jobs (``received``: a fence's answer, a direct-modex request or reply),
hears that a task is being ended or has exited, and cleans up after a job's
last task here. It reaches the rest of the daemon only through ``NodeServices``:
the tasks, a message to send the master, a task to fail, a descriptor to watch.
PMI-1 and PMI-2 (noded/process_managers/pmi1.py, pmi2.py, served on a socket
by socket_service.py) and PMIx (pmix.py) are the three; a fourth is a new module
and one line in served.py.
"""

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from gangsched.noded.node_task import NodeTask
from gangsched.noded.orders import ProcessManagerMessage
from gangsched.noded.process_managers.shared_memory import JobSharedMemory
from gangsched.noded.process_managers.wiring import TaskWiring
from gangsched.noded.task_record import TaskKey
from gangsched.protocol.messages import PmiFence, PmixModexReply, PmixModexRequest
from gangsched.protocol.records import TaskSpec


class ProcessManagerUnavailable(Exception):
    """This node cannot serve the interface; the reason says how to make it able to."""


@dataclass(frozen=True)
class NodeServices:
    """What of the node daemon a process manager uses."""

    node: str
    tasks: Mapping[TaskKey, NodeTask]
    send: Callable[[PmiFence | PmixModexRequest | PmixModexReply], None]  # to the master, which passes it on
    fail: Callable[[NodeTask], None]  # end a task whose ``failure`` says why (once, however often called)
    watch: Callable[[int, Callable[[], None]], None]  # call this when that descriptor is readable
    unwatch: Callable[[int], None]
    shared_memory: JobSharedMemory  # what each job's ranks map in /dev/shm, removed after them


class ProcessManager(Protocol):
    def prepare(self, spec: TaskSpec) -> TaskWiring:
        """The variables and descriptors of a task about to start; may raise ``ProcessManagerUnavailable``."""
        ...

    def attach(self, task: NodeTask, spec: TaskSpec) -> None:
        """Serve a task that started with what ``prepare`` gave it (``task.pmi``: the socket's ``ours``)."""
        ...

    def abandon(self, spec: TaskSpec) -> None:
        """A task prepared for did not start."""
        ...

    def received(self, message: ProcessManagerMessage) -> None:
        """What the master sent for a job of this interface: a fence's answer, a direct-modex request or reply."""
        ...

    def ending(self, task: NodeTask) -> None:
        """The task is being ended: it will not finalize."""
        ...

    def exited(self, task: NodeTask, returncode: int, error: str | None) -> str | None:
        """The reason the task's exit fails its job, if any; frees the job with its last task here."""
        ...

    def close(self) -> None:
        """The daemon stops: nothing of this interface is left (its tasks exited first)."""
        ...


def exit_failure(interface: str, returncode: int, ended: bool, initialized: bool, finalized: bool) -> str | None:
    """Why an MPI task's exit fails its job, as its interface ``interface`` saw it (None: its status says all).

    A rank that never spoke the interface was most likely built with another MPI: it ran as a job of
    one, and its job is named failed rather than passing as N singletons. A rank that exits 0 before
    finalize leaves its peers waiting for it for ever. A task the daemon ended is neither.
    """
    if ended:
        return None
    if not initialized:
        status = f"signal {-returncode}" if returncode < 0 else f"status {returncode}"
        return f"never contacted the process manager ({interface}) and exited with {status}: " \
            "built with another MPI, or no MPI?"
    if returncode == 0 and not finalized:
        return f"exited before {interface} finalize"
    return None
