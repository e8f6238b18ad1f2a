"""The node daemon's PMI side: the daemon's ends of its MPI tasks' PMI_FD sockets, and their jobs.

Each MPI job with ranks here has a ``PmiJob`` (noded/pmi.py, plain code over
lines) that answers its ranks; this module moves the bytes. A line that cannot
be parsed, a reply a task does not read, or a PMI failure (abort, a rank gone
while others wait) fails the job through the task named: the daemon ends it and
its exit carries the reason. A barrier of a job on several nodes leaves as a
``PmiFence`` for the master, and its ``PmiFenceDone`` comes back here. MPICH
leaves shared memory in /dev/shm that only ``MPI_Finalize`` removes; what the
tasks map is noted, and removed when the job's last task here is gone.
"""

import logging
from collections.abc import Callable, Iterable, Mapping

import zmq

from gangsched.noded.pmi import Outcome, PmiError, PmiJob
from gangsched.noded.shared_memory import JobSharedMemory
from gangsched.noded.task_host import NodeTask
from gangsched.noded.tasks import place_in_block
from gangsched.protocol.messages import PmiFence, PmiFenceDone
from gangsched.protocol.records import TaskSpec

log = logging.getLogger("gangsched.noded")


class PmiService:
    def __init__(self, node: str, poller: zmq.Poller, tasks: Mapping[tuple[int, int], NodeTask],
                 send_fence: Callable[[PmiFence], None], fail: Callable[[NodeTask], None]) -> None:
        """``tasks``: the daemon's tasks by (job id, rank); ``send_fence``: a barrier to gather across the
        job's nodes; ``fail``: end a task whose ``failure`` says why (once, however often it is called)."""
        self._node = node
        self._poller = poller
        self._tasks = tasks
        self._send_fence = send_fence
        self._fail = fail
        self._by_fd: dict[int, NodeTask] = {}
        self._jobs: dict[int, PmiJob] = {}
        self._shared_memory = JobSharedMemory()

    def attach(self, task: NodeTask, spec: TaskSpec) -> None:
        """Serve a task just launched with a PMI socket."""
        assert task.pmi is not None
        if spec.job_id not in self._jobs:
            index, _, _ = place_in_block(spec)
            self._jobs[spec.job_id] = PmiJob(spec.job_id, spec.size, spec.block or [spec.size], index, spec.kvsname)
        self._by_fd[task.pmi.fileno()] = task
        self._poller.register(task.pmi.fileno(), zmq.POLLIN)

    def ready(self, fds: Iterable[object]) -> list[NodeTask]:
        """The tasks whose PMI sockets are among a poll's ready ``fds``."""
        return [self._by_fd[fd] for fd in fds if isinstance(fd, int) and fd in self._by_fd]

    def readable(self, task: NodeTask) -> None:
        assert task.pmi is not None and task.pmi_lines is not None
        try:
            data = task.pmi.recv(65536)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if not data:  # the task closed its end: it exited, or is done with PMI
            self.close(task)
            return
        job = self._jobs[task.job_id]
        try:
            lines = task.pmi_lines.feed(data)
        except PmiError as error:
            self._failed(task, f"sent a malformed PMI line: {error}")
            return
        self._shared_memory.note(task.job_id, task.pids())  # a crash later leaves it in /dev/shm
        for line in lines:
            if task.pmi is None:  # failed on an earlier line: the rest is not read
                return
            self._outcome(job, job.handle(task.rank, line))

    def fence_done(self, message: PmiFenceDone) -> None:
        job = self._jobs.get(message.job_id)
        if job is not None:
            self._outcome(job, job.fence_done(message.epoch, message.kvs))

    def ending(self, task: NodeTask) -> None:
        """A task is being ended: its ranks will not unlink their shared memory."""
        if task.job_id in self._jobs:
            self._shared_memory.note(task.job_id, task.pids())

    def exited(self, task: NodeTask, returncode: int, error: str | None) -> str | None:
        """The reason the task's exit fails its job, if any, once it has exited; frees the job with its
        last task here."""
        self.close(task)
        job = self._jobs.get(task.job_id)
        if job is None:
            return error
        if error is None and returncode == 0 and task.rank in job.initialized - job.finalized:
            error = "exited before PMI finalize"  # its peers would wait for it for ever
        if not any(other.job_id == task.job_id for other in self._tasks.values()):
            del self._jobs[task.job_id]
            for name in self._shared_memory.release(task.job_id, task.uid):
                log.info("job %d left /dev/shm/%s: removed", task.job_id, name)
        return error

    def close(self, task: NodeTask) -> None:
        if task.pmi is not None:
            fd = task.pmi.fileno()
            self._poller.unregister(fd)
            del self._by_fd[fd]
            task.close_pmi()

    def _outcome(self, job: PmiJob, outcome: Outcome) -> None:
        for reply in outcome.replies:
            task = self._tasks.get((job.job_id, reply.rank))
            if task is None or task.pmi is None:
                continue
            try:
                sent = task.pmi.send(reply.line)
            except (BlockingIOError, OSError):
                sent = -1
            if sent != len(reply.line):  # replies are a few hundred bytes: only a task that never reads
                self._failed(task, "does not read its PMI replies")
        if outcome.fence is not None:
            fence = outcome.fence
            self._send_fence(PmiFence(node=self._node, job_id=job.job_id, epoch=fence.epoch, kvs=fence.kvs))
        if outcome.failure is not None:
            failed = self._tasks.get((job.job_id, outcome.failure.rank))
            if failed is not None:
                self._failed(failed, outcome.failure.reason)

    def _failed(self, task: NodeTask, reason: str) -> None:
        """Fail the job through this task: it is ended, and its exit carries ``reason``."""
        log.warning("job %d rank %d %s", task.job_id, task.rank, reason)
        task.failure = task.failure or reason
        self.close(task)
        self._fail(task)
