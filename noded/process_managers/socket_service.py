"""PMI-1 and PMI-2 as a node daemon serves them: the daemon's end of each MPI task's ``PMI_FD``.

Each job with ranks here has a wire job (``Pmi1Job`` or ``Pmi2Job``, plain code
over bytes) that answers its ranks; this module moves the bytes. Input that is
not the protocol, a reply a task does not read, or a PMI failure (abort, a rank
gone while others wait) fails the job through the task named: the daemon ends
it and its exit carries the reason. A fence of a job on several nodes leaves as
a ``PmiFence`` for the master, and its ``PmiFenceDone`` comes back here. MPICH
and Intel MPI leave shared memory in /dev/shm that only ``MPI_Finalize``
removes; what the tasks map is noted, and removed when the job's last task here
is gone.
"""

import logging
import socket
from collections.abc import Sequence
from typing import Protocol

from gangsched.noded.node_task import NodeTask
from gangsched.noded.orders import ProcessManagerMessage
from gangsched.noded.process_managers.fences import Outcome, kvs_name
from gangsched.noded.process_managers.interface import NodeServices, exit_failure
from gangsched.noded.process_managers.wiring import TaskWiring
from gangsched.noded.task_identity import place_in_block
from gangsched.noded.task_record import TaskKey, World
from gangsched.protocol.messages import PmiFence, PmiFenceDone
from gangsched.protocol.records import TaskSpec

log = logging.getLogger("gangsched.noded")
RECEIVE_BYTES = 65536


class WireJob(Protocol):
    world: World
    initialized: set[int]  # ranks that spoke the protocol's init
    finalized: set[int]

    def received(self, rank: int, data: bytes) -> list[Outcome]: ...
    def fence_done(self, epoch: int, kvs: dict[str, str]) -> Outcome: ...


class WireJobType(Protocol):
    def __call__(self, world: World, size: int, block: Sequence[int], node_index: int,
                 kvsname: str = "") -> WireJob: ...


class SocketService:
    """One wire protocol (``job_type``) served on ``PMI_FD`` to every task of the jobs that ask for it."""

    def __init__(self, job_type: WireJobType, name: str, variables: dict[str, str], node: NodeServices) -> None:
        """``name``: the protocol's, for reasons; ``variables``: set for each task besides the PMI ones."""
        self._job_type = job_type
        self._name = name
        self._variables = variables
        self._node = node
        self._jobs: dict[World, WireJob] = {}
        self._ended: set[TaskKey] = set()  # tasks the daemon ends: they are not to finalize
        self._shared_memory = node.shared_memory

    def prepare(self, spec: TaskSpec) -> TaskWiring:
        ours, passed = socket.socketpair()
        environment = dict(self._variables, PMI_FD=str(passed.fileno()), PMI_RANK=str(spec.rank),
                           PMI_SIZE=str(spec.size), PMI_SPAWNED="0", PMI_JOBID=kvs_name(spec.job_id, spec.kvsname))
        return TaskWiring(environment, ours, passed)

    def attach(self, task: NodeTask, spec: TaskSpec) -> None:
        assert task.pmi is not None
        world = World.of(spec)
        if world not in self._jobs:
            index, _, _ = place_in_block(spec)
            self._jobs[world] = self._job_type(world, spec.size, spec.block or [spec.size], index, spec.kvsname)
        task.pmi.setblocking(False)
        self._node.watch(task.pmi.fileno(), lambda: self._readable(task))

    def abandon(self, spec: TaskSpec) -> None:
        if not any(World.of(other) == World.of(spec) for other in self._node.tasks.values()):
            self._jobs.pop(World.of(spec), None)  # none of its tasks here ever ran: none left shared memory

    def received(self, message: ProcessManagerMessage) -> None:
        job = self._jobs.get(World.of(message))
        if job is not None and isinstance(message, PmiFenceDone):  # nothing else is sent for these jobs
            self._outcome(job, job.fence_done(message.epoch, message.kvs))

    def ending(self, task: NodeTask) -> None:
        if World.of(task) in self._jobs:
            self._ended.add(TaskKey.of(task))
            self._shared_memory.note(World.of(task), task.pids())

    def exited(self, task: NodeTask, returncode: int, error: str | None) -> str | None:
        self._close(task)
        world = World.of(task)
        job = self._jobs.get(world)
        if job is None:
            return error
        key = TaskKey.of(task)
        ended = key in self._ended
        self._ended.discard(key)
        error = error or exit_failure(self._name, returncode, ended, task.rank in job.initialized,
                                      task.rank in job.finalized)
        if not any(World.of(other) == world for other in self._node.tasks.values()):
            del self._jobs[world]
            for name in self._shared_memory.release(world, task.uid):
                log.info("%s left /dev/shm/%s: removed", world, name)
        return error

    def close(self) -> None:
        self._jobs.clear()

    def _readable(self, task: NodeTask) -> None:
        if task.pmi is None:
            return
        try:
            data = task.pmi.recv(RECEIVE_BYTES)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the task closed its end: it exited, or is done with PMI
            self._close(task)
            return
        job = self._jobs[World.of(task)]
        self._shared_memory.note(job.world, task.pids())  # a crash later leaves it in /dev/shm
        for outcome in job.received(task.rank, data):
            if task.pmi is None:  # failed on an earlier command: the rest is not read
                return
            self._outcome(job, outcome)

    def _close(self, task: NodeTask) -> None:
        if task.pmi is not None:
            self._node.unwatch(task.pmi.fileno())
            task.close_pmi()

    def _outcome(self, job: WireJob, outcome: Outcome) -> None:
        for reply in outcome.replies:
            task = self._node.tasks.get(TaskKey(*job.world, reply.rank))
            if task is None or task.pmi is None:
                continue
            try:
                sent = task.pmi.send(reply.line)
            except (BlockingIOError, OSError):
                sent = -1
            if sent != len(reply.line):  # replies are a few hundred bytes: only a task that never reads
                self._failed(task, f"does not read its {self._name} replies")
        if outcome.fence is not None:
            fence = outcome.fence
            self._node.send(PmiFence(node=self._node.node, job_id=job.world.job_id, step=job.world.step,
                                     epoch=fence.epoch, kvs=fence.kvs))
        if outcome.failure is not None:
            failed = self._node.tasks.get(TaskKey(*job.world, outcome.failure.rank))
            if failed is not None:
                self._failed(failed, outcome.failure.reason)

    def _failed(self, task: NodeTask, reason: str) -> None:
        """Fail the job through this task: it is ended, and its exit carries ``reason``."""
        log.warning("%s %s", TaskKey.of(task), reason)
        task.failure = task.failure or reason
        self._close(task)
        self._node.fail(task)
