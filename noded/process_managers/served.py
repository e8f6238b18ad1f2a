"""The process-manager interfaces this node serves, and which serves each job (its ``--mpi``).

``ProcessManagers`` is what the node's task runner holds: it asks the job's
interface to prepare each task, hands it the task once it runs, routes the
master's fence answers and the readable descriptors to it, and tells it of
ends and exits. PMI-1 and PMI-2 need nothing but a socket; PMIx needs the
OpenPMIx library, and where none loads the node says so in its hello and the
master refuses ``--mpi pmix`` with the reason (docs/mpi.md).
"""

import ctypes.util
import logging
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

import zmq

from gangsched.noded.node_task import NodeTask
from gangsched.noded.orders import ProcessManagerMessage
from gangsched.noded.process_managers.interface import (
    NodeServices,
    ProcessManager,
    ProcessManagerUnavailable,
)
from gangsched.noded.process_managers.pmi1 import Pmi1Job
from gangsched.noded.process_managers.pmi2 import Pmi2OrPmi1Job
from gangsched.noded.process_managers.pmix import PmixService
from gangsched.noded.process_managers.shared_memory import JobSharedMemory
from gangsched.noded.process_managers.socket_service import SocketService
from gangsched.noded.process_managers.wiring import TaskWiring
from gangsched.noded.settings import NodeSettings
from gangsched.noded.task_record import TaskKey, World
from gangsched.protocol.messages import PmiFence, PmixModexReply, PmixModexRequest
from gangsched.protocol.records import MpiKind, TaskSpec

log = logging.getLogger("gangsched.noded")


class ProcessManagers:
    def __init__(self, settings: NodeSettings, runs_mpi: bool, poller: zmq.Poller, tasks: Mapping[TaskKey, NodeTask],
                 send: Callable[[PmiFence | PmixModexRequest | PmixModexReply], None],
                 fail: Callable[[NodeTask], None]) -> None:
        self._poller = poller
        self._handlers: dict[int, Callable[[], None]] = {}
        self._tasks = tasks
        self._served: dict[MpiKind, ProcessManager] = {}
        self.unavailable: dict[MpiKind, str] = {}
        self._jobs: dict[World, ProcessManager] = {}
        if not runs_mpi:  # `gang bench scale`'s emulated tasks
            self.unavailable = {kind: "this node's tasks are emulated" for kind in MpiKind if kind is not MpiKind.NONE}
            return
        node = NodeServices(settings.name, tasks, send, fail, self._watch, self._unwatch,
                            JobSharedMemory(settings.spool() / "shared-memory"))
        self._served = {
            MpiKind.PMI1: SocketService(Pmi1Job, "PMI-1", {}, node),
            MpiKind.PMI2: SocketService(Pmi2OrPmi1Job, "PMI-2", pmi2_variables(settings.pmi2_library), node),
        }
        try:
            self._served[MpiKind.PMIX] = PmixService(settings, node)
        except ProcessManagerUnavailable as error:
            self.unavailable[MpiKind.PMIX] = str(error)
            log.info("--mpi pmix is not served here: %s", error)

    @property
    def served(self) -> list[MpiKind]:
        return sorted(self._served)

    def prepare(self, spec: TaskSpec) -> TaskWiring | None:
        """What the task's interface gives it before it starts (None: it asked for none)."""
        if spec.mpi is MpiKind.NONE:
            return None
        manager = self._served.get(spec.mpi)
        if manager is None:
            raise ProcessManagerUnavailable(f"--mpi {spec.mpi} is not served on this node: "
                                            f"{self.unavailable.get(spec.mpi, 'unknown')}")
        wiring = manager.prepare(spec)
        self._jobs[World.of(spec)] = manager
        return wiring

    def attach(self, task: NodeTask, spec: TaskSpec) -> None:
        self._jobs[World.of(spec)].attach(task, spec)

    def abandon(self, spec: TaskSpec) -> None:
        manager = self._jobs.get(World.of(spec))
        if manager is not None:
            manager.abandon(spec)
            self._forget_if_done(World.of(spec))

    def handlers(self, ready: Iterable[object]) -> list[Callable[[], None]]:
        """What to call for the descriptors of a poll's ``ready`` that an interface watches."""
        return [self._handlers[fd] for fd in ready if isinstance(fd, int) and fd in self._handlers]

    def received(self, message: ProcessManagerMessage) -> None:
        manager = self._jobs.get(World.of(message))
        if manager is not None:
            manager.received(message)

    def ending(self, task: NodeTask) -> None:
        manager = self._jobs.get(World.of(task))
        if manager is not None:
            manager.ending(task)

    def exited(self, task: NodeTask, returncode: int, error: str | None) -> str | None:
        manager = self._jobs.get(World.of(task))
        if manager is None:
            return error
        error = manager.exited(task, returncode, error)
        self._forget_if_done(World.of(task))
        return error

    def close(self) -> None:
        for manager in self._served.values():
            manager.close()

    def _forget_if_done(self, world: World) -> None:
        if not any(World.of(task) == world for task in self._tasks.values()):
            del self._jobs[world]

    def _watch(self, fd: int, handler: Callable[[], None]) -> None:
        self._handlers[fd] = handler
        self._poller.register(fd, zmq.POLLIN)

    def _unwatch(self, fd: int) -> None:
        if self._handlers.pop(fd, None) is not None:
            self._poller.unregister(fd)


def pmi2_variables(library: Path | None) -> dict[str, str]:
    """What an Intel MPI task needs to speak PMI-2: the interface, and a client library that speaks it
    (Intel MPI has none of its own); MPICH built with PMI-2 needs neither."""
    found = library or _system_library("pmi2")
    if found is None:
        return {"I_MPI_PMI": "pmi2"}  # Intel MPI then falls back to PMI-1: docs/mpi.md says so
    return {"I_MPI_PMI": "pmi2", "I_MPI_PMI_LIBRARY": str(found)}


def _system_library(name: str) -> Path | None:
    found = ctypes.util.find_library(name)
    if found is None:
        return None
    for folder in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
        if (Path(folder) / found).exists():
            return Path(folder) / found
    return None
