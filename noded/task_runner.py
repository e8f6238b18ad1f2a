"""A node daemon's tasks as its host runs them: the core's orders for them carried out.

The core (noded/core.py) knows its tasks by (job id, rank); this module holds
the real ones under the same keys (processes under containment, or `gang bench
scale`'s emulated tasks: noded/task_host.py), signals what a switch's plan
says, reads the clocks of those that ran, starts, ends and looks at them as
ordered, and reaps them when their pidfd says they exited. An MPI task is
served by its job's process-manager interface (noded/process_managers/), whose
fences go to the master through the core and whose failures end the task
through it.
"""

import logging
import time
from collections.abc import Callable, Iterable

import zmq

from gangsched.noded.core import NodeCore
from gangsched.noded.process_managers.interface import ProcessManagerUnavailable
from gangsched.noded.process_managers.served import ProcessManagers
from gangsched.noded.settings import NodeSettings
from gangsched.noded.switching import SwitchPlan
from gangsched.noded.task_host import NodeTask, TaskHost
from gangsched.noded.task_states import (
    Checkpoint,
    Kill,
    Launch,
    Look,
    Order,
    ReadMemory,
    Sweep,
    TaskKey,
    Terminate,
    ToProcessManager,
    Watch,
)
from gangsched.noded.tasks import LaunchError
from gangsched.protocol.records import TaskSpec

log = logging.getLogger("gangsched.noded")


class TaskRunner:
    def __init__(self, settings: NodeSettings, host: TaskHost, poller: zmq.Poller,
                 core: Callable[[], NodeCore]) -> None:
        """``core``: the node's core, once made (its hello names what ``process_managers`` serve)."""
        self._settings = settings
        self._name = settings.name
        self._spools = (settings.spool(), settings.user_spool_dir)
        self._processor_cores = settings.processor_cores()
        self._host = host
        self._poller = poller
        self._the_core = core
        self.tasks: dict[TaskKey, NodeTask] = {}
        self._by_pidfd: dict[int, NodeTask] = {}
        self.process_managers = ProcessManagers(settings, host.runs_mpi, poller, self.tasks,
                                                lambda message: core().from_process_manager(message), self._fail)

    @property
    def _core(self) -> NodeCore:
        return self._the_core()

    def exits(self, ready: Iterable[object]) -> list[NodeTask]:
        """The tasks whose pidfds are among a poll's ready ``fds``: they exited."""
        return [self._by_pidfd[fd] for fd in ready if isinstance(fd, int) and fd in self._by_pidfd]

    def signal(self, plan: SwitchPlan) -> tuple[int, list[tuple[int, int, int]]]:
        """Stop, then continue, as ``plan`` says; when that was done (monotonic ns), and what each task
        that ran used: its CPU ns and its run-queue wait since the last reading, and (rank 0 only) its
        barriers."""
        tasks = self.tasks
        for state in plan.stop:
            tasks[state.key].stop()
        for state in plan.resume:
            tasks[state.key].resume()
        applied_ns = time.monotonic_ns()
        readings = []
        for state in plan.ran:
            task = tasks[state.key]
            cpu_ns = task.take_cpu_ns()
            readings.append((cpu_ns, task.take_waited_ns(), task.read_progress() if state.key[1] == 0 else 0))
        for state in plan.stop:  # off the switch's path: the stop signal holds them meanwhile
            tasks[state.key].hold()
        return applied_ns, readings

    def carry_out(self, order: Order) -> None:
        match order:
            case Launch(spec, runnable):
                self._launch(spec, runnable)
            case Terminate(key):
                task = self.tasks[key]
                self.process_managers.ending(task)
                task.terminate()
            case Kill(key):
                self.tasks[key].kill()
            case Checkpoint(key):
                self.tasks[key].checkpoint()
            case Look(key, attempts):
                task = self.tasks[key]
                for _ in range(attempts):
                    if not task.follow():
                        break
                else:
                    self._core.still_forking(key)
            case Sweep(live):
                self._host.sweep(set(live))
            case Watch(keys):
                now = time.monotonic()
                for key in keys & self.tasks.keys():
                    if self.tasks[key].escaped():
                        self._core.escaped(key, now)
            case ReadMemory(keys):
                now = time.monotonic()
                for key in keys & self.tasks.keys():
                    self._core.memory(key, self.tasks[key].read_memory(), now)
            case ToProcessManager(message):
                self.process_managers.received(message)
            case _:
                raise ValueError(f"not an order for tasks: {order}")

    def exited(self, task: NodeTask) -> None:
        """Reap a task whose pidfd said it ended, and tell the core."""
        self._poller.unregister(task.pidfd)
        del self._by_pidfd[task.pidfd]
        del self.tasks[(task.job_id, task.rank)]
        progress = task.read_progress()
        cpu_ns = task.take_cpu_ns()  # the zombie's clock still reads until reaped
        memory = task.read_memory()
        returncode = task.reap()
        self._host.ended(task)
        log.info("job %d rank %d exited with %d", task.job_id, task.rank, returncode)
        error = self.process_managers.exited(task, returncode, task.failure)
        self._core.exited((task.job_id, task.rank), returncode, error, cpu_ns, progress, memory, time.monotonic())

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

    def _launch(self, spec: TaskSpec, runnable: bool) -> None:
        key = (spec.job_id, spec.rank)
        cores = self._processor_cores[spec.processor % len(self._processor_cores)]
        wiring = None
        try:
            wiring = self.process_managers.prepare(spec)
            task = self._host.launch(spec, self._name, self._spools, runnable, cores, wiring)
        except Exception as error:  # a job that never starts must not stay RUNNING for ever
            if wiring is not None:
                wiring.close()
                self.process_managers.abandon(spec)
            if isinstance(error, (OSError, ValueError, LaunchError, ProcessManagerUnavailable)):
                log.warning("job %d rank %d cannot start: %s", spec.job_id, spec.rank, error)
                reason = f"could not start: {error}"
            else:
                log.exception("job %d rank %d: launching failed", spec.job_id, spec.rank)
                reason = f"could not start: internal error of node {self._name}: {type(error).__name__}: {error}"
            self._core.not_started(key, reason, time.monotonic())
            return
        self._core.launched(key, runnable, time.monotonic_ns())
        self.tasks[key] = task
        self._by_pidfd[task.pidfd] = task
        self._poller.register(task.pidfd, zmq.POLLIN)
        if wiring is not None:
            self.process_managers.attach(task, spec)
        log.info("job %d rank %d started as pid %d", spec.job_id, spec.rank, task.pid)

    def _fail(self, task: NodeTask) -> None:
        """PMI failed the task's job: it is ended, and its exit carries ``task.failure``."""
        self._core.end((task.job_id, task.rank), time.monotonic())
