"""A node daemon's tasks as its host runs them: the core's orders carried out, and what comes of
them reported as events (noded/task_events.py) for the loop to feed to the core.

The core (noded/core.py) knows its tasks by ``TaskKey``; this module holds the
real ones under the same keys (processes under containment, or `gang bench
scale`'s emulated tasks: noded/hosts.py), signals what a switch's plan says,
reads the clocks of those that ran, starts, ends and looks at them as ordered,
and reaps them when their pidfd says they exited. An MPI task is served by its
job's process-manager interface (noded/process_managers/), whose fences for
the master and whose failures are events too. It never calls the core.
"""

import functools
import logging
import time
from collections import deque
from collections.abc import Callable, Iterable

import zmq

from gangsched.noded.hosts import Starting, TaskHost
from gangsched.noded.launch_thread import LaunchThread
from gangsched.noded.node_task import NodeTask
from gangsched.noded.orders import (
    CatchNewProcesses,
    CheckDescheduled,
    Checkpoint,
    Deliver,
    Kill,
    Launch,
    Order,
    ReadMemory,
    ReapStrays,
    Terminate,
    ToProcessManager,
)
from gangsched.noded.process_managers.interface import ProcessManagerUnavailable
from gangsched.noded.process_managers.served import ProcessManagers
from gangsched.noded.process_managers.wiring import TaskWiring
from gangsched.noded.settings import NodeSettings
from gangsched.noded.stream_relay import StreamRelay
from gangsched.noded.switching import SwitchPlan
from gangsched.noded.task_events import (
    Escaped,
    Exited,
    Failed,
    ForMaster,
    Launched,
    MemoryRead,
    NotStarted,
    StillForking,
    TaskEvent,
)
from gangsched.noded.task_identity import LaunchError
from gangsched.noded.task_processes import TaskFolders
from gangsched.noded.task_record import TaskKey
from gangsched.protocol.records import TaskSpec

log = logging.getLogger("gangsched.noded")


class TaskExecutor:
    def __init__(self, settings: NodeSettings, host: TaskHost, poller: zmq.Poller,
                 context: zmq.Context[zmq.Socket[bytes]]) -> None:
        self._settings = settings
        self._name = settings.name
        self._folders = TaskFolders(settings.spool(), settings.user_spool_dir, settings.run_dir)
        self._processor_cores = settings.processor_cores()
        self._host = host
        self._poller = poller
        self.tasks: dict[TaskKey, NodeTask] = {}
        self._by_pidfd: dict[int, NodeTask] = {}
        self.events: deque[TaskEvent] = deque()  # for the loop to feed to the core, in order
        self._beside = LaunchThread() if host.starts_beside else None
        self.starting: tuple[Launch, TaskWiring | None] | None = None  # a start under way beside the loop
        self.streams = StreamRelay(context, poller)  # srun steps' standard streams
        self.process_managers = ProcessManagers(
            settings, host.runs_mpi, poller, self.tasks, lambda message: self.events.append(ForMaster(message)),
            lambda task: self.events.append(Failed(TaskKey.of(task))))

    @property
    def start_fd(self) -> int | None:
        """Readable once the start under way beside the loop is done (None: starts are not beside it)."""
        return None if self._beside is None else self._beside.fd

    def exits(self, ready: Iterable[object]) -> list[NodeTask]:
        """The tasks whose pidfds are among a poll's ready ``fds``: they exited."""
        return [self._by_pidfd[fd] for fd in ready if isinstance(fd, int) and fd in self._by_pidfd]

    def signal(self, plan: SwitchPlan) -> tuple[int, list[tuple[int, int, int]]]:
        """Stop, then continue, as ``plan`` says; when that was done (monotonic ns), and what each task
        that ran used: its CPU ns and its run-queue wait since the last reading, and (rank 0 only) its
        barriers."""
        tasks = self.tasks
        for record in plan.stop:
            tasks[record.key].stop()
        for record in plan.resume:
            tasks[record.key].resume()
        applied_ns = time.monotonic_ns()
        readings = []
        for record in plan.ran:
            task = tasks[record.key]
            cpu_ns = task.take_cpu_ns()
            progress = 0
            if record.key.rank == 0:
                failed = task.failure
                progress = task.read_progress()
                if task.failure is not failed:  # it wrote a count beyond what one may be
                    self.events.append(Failed(record.key))
            readings.append((cpu_ns, task.take_waited_ns(), progress))
        for record in plan.stop:  # off the switch's path: the stop signal holds them meanwhile
            tasks[record.key].keep_stopped()
        return applied_ns, readings

    def carry_out(self, order: Order) -> None:
        match order:
            case Launch():
                self._launch(order)
            case Terminate(key):
                task = self.tasks[key]
                self.process_managers.ending(task)
                task.terminate()
            case Kill(key):
                self.tasks[key].kill()
            case Checkpoint(key):
                self.tasks[key].checkpoint()
            case Deliver(key, number, whole):
                self.tasks[key].deliver(number, whole)
            case CatchNewProcesses(key, attempts):
                task = self.tasks[key]
                for _ in range(attempts):
                    if not task.take_in_new_processes():
                        break
                else:
                    self.events.append(StillForking(key))
            case ReapStrays(live):
                self._host.sweep(set(live))
            case CheckDescheduled(keys):
                self.events.extend(Escaped(key) for key in keys & self.tasks.keys() if self.tasks[key].escaped())
            case ReadMemory(keys):
                self.events.extend(MemoryRead(key, self.tasks[key].read_memory()) for key in keys & self.tasks.keys())
            case ToProcessManager(message):
                self.process_managers.received(message)
            case _:
                raise ValueError(f"not an order for tasks: {order}")

    def exited(self, task: NodeTask) -> None:
        """Reap a task whose pidfd said it ended."""
        self._poller.unregister(task.pidfd)
        del self._by_pidfd[task.pidfd]
        key = TaskKey.of(task)
        del self.tasks[key]
        progress = task.read_progress()
        cpu_ns = task.take_cpu_ns()  # the zombie's clock still reads until reaped
        memory = task.read_memory()
        returncode = task.reap()
        self._host.ended(task)
        log.info("%s exited with %d", key, returncode)
        error = self.process_managers.exited(task, returncode, task.failure)
        self.events.append(Exited(key, returncode, error, cpu_ns, progress, memory))

    def wait_for_all(self, grace_s: float) -> None:
        """The daemon stops and its tasks were ended: their exits for ``grace_s``, then SIGKILL for the rest."""
        deadline = time.monotonic() + grace_s
        # only the tasks' pidfds: an unread message would make every poll return at once, and
        # a real-time daemon spinning until the grace ends starves the machine
        exits = zmq.Poller()
        for pidfd in self._by_pidfd:
            exits.register(pidfd, zmq.POLLIN)
        while self.tasks and time.monotonic() < deadline:
            for fd, _ in exits.poll(100):
                if fd in self._by_pidfd:
                    exits.unregister(fd)
                    self.exited(self._by_pidfd[fd])
        for task in list(self.tasks.values()):
            task.kill()
            self.exited(task)

    def _launch(self, order: Launch) -> None:
        """Start the task; beside the loop where the host's starts take long (``starting`` says which, and
        ``started`` ends it), else here and now."""
        spec = order.spec
        cores = self._cores_of(spec.processors)
        try:
            wiring = self.process_managers.prepare(spec)
        except Exception as error:
            self._not_started(spec, None, error)
            return
        start = functools.partial(self._host.start, spec, self._name, self._folders, cores, wiring)
        if self._beside is None:
            self._go(order, wiring, start, order.runnable)
        else:
            self._beside.start(start)
            self.starting = (order, wiring)

    def _cores_of(self, processors: list[int]) -> set[int] | None:
        """The cores a task of these processors is pinned to (every one's); None: not pinned."""
        cores: set[int] = set()
        for processor in processors:
            own = self._processor_cores[processor % len(self._processor_cores)]
            if own is None:
                return None
            cores |= own
        return cores

    def started(self, runnable: bool) -> None:
        """The start under way beside the loop is done: the task goes on, running or stopped as ``runnable``
        says (which the loop decides with the switches applied meanwhile)."""
        assert self._beside is not None and self.starting is not None
        (order, wiring), self.starting = self.starting, None
        self._go(order, wiring, self._beside.outcome, runnable)

    def _go(self, order: Launch, wiring: TaskWiring | None, start: Callable[[], Starting], runnable: bool) -> None:
        spec = order.spec
        key = TaskKey.of(spec)
        try:
            task = start().go(runnable)
        except Exception as error:
            self._not_started(spec, wiring, error)
            return
        self.events.append(Launched(key, runnable, time.monotonic_ns()))
        if task.pipes is not None and spec.streams is not None:
            self.streams.attach(spec, spec.streams, task.pipes)
        self.tasks[key] = task
        self._by_pidfd[task.pidfd] = task
        self._poller.register(task.pidfd, zmq.POLLIN)
        if wiring is not None:
            self.process_managers.attach(task, spec)
        log.info("%s started as pid %d, %s", key, task.pid,
                 "running" if runnable else "stopped")

    def _not_started(self, spec: TaskSpec, wiring: TaskWiring | None, error: Exception) -> None:
        """A job that never starts must not stay RUNNING for ever."""
        if wiring is not None:
            wiring.close()
            self.process_managers.abandon(spec)
        if isinstance(error, (OSError, ValueError, LaunchError, ProcessManagerUnavailable)):
            log.warning("%s cannot start: %s", TaskKey.of(spec), error)
            reason = f"could not start: {error}"
        else:
            log.error("%s: launching failed", TaskKey.of(spec), exc_info=error)
            reason = f"could not start: internal error of node {self._name}: {type(error).__name__}: {error}"
        self.events.append(NotStarted(TaskKey.of(spec), reason))
