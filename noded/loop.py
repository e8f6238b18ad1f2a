"""The node daemon's loop around ``NodeCore``, as ``master/loop.py`` is around ``MasterCore``.

The loop feeds the core (noded/core.py) what happens: the master's messages, a
switch, what the mechanism reports of the tasks (their launches, exits, memory,
the process-manager interfaces' fences), its timers falling due. It carries out
the core's answers: the messages go out over the master's sockets
(noded/master_link.py), the orders for tasks to the executor
(noded/executor.py), whose events it feeds back to the core once the orders
are drained; and it waits until the core's next deadline. It decides nothing.

The switch path (``_apply``) is the hot path: the core plans the stops and the
continues, the tasks are signalled (stops first) and the clocks of those that
ran are read, and the core turns what they read into the quantum's account.
"""

import functools
import logging
import math
import os
import signal
import time
import uuid
from collections import deque
from typing import Any

import zmq

from gangsched.daemon.curve import CurveError
from gangsched.daemon.logs import survive
from gangsched.daemon.realtime import freeze_start_up_objects, raise_priority, zmq_context
from gangsched.daemon.signals import SignalEvents
from gangsched.daemon.sockets import has_message
from gangsched.noded.containment import ContainmentError
from gangsched.noded.core import NodeCore, Route
from gangsched.noded.executor import TaskExecutor
from gangsched.noded.holding import WATCH_INTERVAL_S
from gangsched.noded.hosts import ProcessHost, TaskHost
from gangsched.noded.master_link import MasterLink
from gangsched.noded.memory import host_memory
from gangsched.noded.orders import Connect, UseMaster
from gangsched.noded.settings import NodeSettings
from gangsched.noded.task_start import MissingTool
from gangsched.protocol.messages import Message, NodeColumn, NodeHello, SlotSwitch
from gangsched.protocol.records import PeerEndpoint

log = logging.getLogger("gangsched.noded")


class NodeDaemon:
    def __init__(self, settings: NodeSettings, host: TaskHost | None = None,
                 context: zmq.Context[zmq.Socket[bytes]] | None = None, poller: zmq.Poller | None = None) -> None:
        """``host``, ``context`` and ``poller``: given where one process runs many daemons (`gang bench
        scale`), which then share one I/O thread and one poll, and step each (``step``) in turn."""
        self._settings = settings
        self.name = settings.name
        settings.spool().mkdir(parents=True, exist_ok=True)
        if settings.run_dir is not None:  # another user's task gets a folder of its own in it: passable by all
            settings.run_dir.mkdir(mode=0o711, parents=True, exist_ok=True)
        self._host = host or ProcessHost(self.name, settings.spool(), settings.containment,
                                         settings.freeze_descheduled, settings.cgroup_parent,
                                         settings.cgroup_delegated, settings.task_pids_max, settings.task_pids_v1)
        log.info("tasks are held by %s", self._host.description)
        priority = settings.realtime_priority
        realtime = priority > 0 and raise_priority(priority, log)
        self._owns_context = context is None
        self._context = context or zmq_context(priority if realtime else None)
        self._poller = poller or zmq.Poller()
        self._link = MasterLink(settings, self._context, self._poller)
        # the executor first: the hello names the process-manager interfaces it serves
        self._executor = TaskExecutor(settings, self._host, self._poller, self._context)
        self._core = NodeCore(self._hello(), settings.kill_grace_s, settings.report_delay_ms, self._host.forks,
                              WATCH_INTERVAL_S if self._host.watches_descheduled else None, settings.masters())
        self._waiting: deque[Message] = deque()  # the master's messages read and not yet handled
        self._starting = zmq.Poller()  # while a start runs beside the loop: the switches, and its end
        self._starting.register(self._link.sub, zmq.POLLIN)
        if self._executor.start_fd is not None:
            self._starting.register(self._executor.start_fd, zmq.POLLIN)

    @property
    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        return self._link.sockets

    def run(self) -> None:
        with SignalEvents([signal.SIGTERM, signal.SIGINT]) as signals:
            self._poller.register(signals.fileno(), zmq.POLLIN)
            freeze_start_up_objects()
            due = self._core.deadlines.first
            while True:
                ready = dict(self._poller.poll(poll_ms(due)))
                if signals.fileno() in ready and signals.drain():
                    log.info("shutting down: ending %d tasks", len(self._core.tasks))
                    break
                due = self.step(ready)
        # leave nothing behind: SIGTERM and continue every task, SIGKILL after the grace
        self._core.end_all(time.monotonic())
        self._carry_out()
        self._executor.wait_for_all(self._settings.kill_grace_s)
        self._carry_out()  # the exits, on their way as the sockets close
        self.close()

    def step(self, ready: dict[Any, int]) -> float:
        """Handle what ``ready`` (a poll's result) holds for this daemon, then its timers; when they next
        fall due (monotonic seconds)."""
        # each step alone: one that fails is logged, and the others and the loop go on;
        # the master's messages first, as a new column goes out before the switch that needs it
        link, executor = self._link, self._executor
        if link.connections in ready and link.connected():
            survive(log, "a new connection to the master", lambda: self._core.connected(time.monotonic()))
        if link.dealer in ready or self._waiting:
            survive(log, "reading the master's messages", self._receive_all)
        if link.sub in ready:
            survive(log, "the switch", self._switch)
        if link.relay_pull is not None and link.relay_pull in ready:
            survive(log, "relaying node messages", link.relay_messages)
        if len(ready) > 1 or link.sub not in ready:  # most wake-ups are a switch's alone
            for handler in executor.process_managers.handlers(ready):
                survive(log, "serving MPI tasks", handler)
                self._carry_out()
            for what, relay in executor.streams.handlers(ready):
                survive(log, what, relay)
            for task in executor.exits(ready):
                survive(log, f"job {task.job_id} rank {task.rank}'s exit", functools.partial(executor.exited, task))
                self._carry_out()
        for job_id, step_id in executor.streams.gone(time.monotonic()):
            survive(log, f"job {job_id} step {step_id} without its srun",
                    functools.partial(self._core.srun_gone, job_id, step_id, time.monotonic()))
            self._carry_out()
        # most wake-ups are a switch's, with no timer due: at a thousand daemons a process (`gang bench
        # scale`) spent a fifth of each one's switch going through timers that were not due
        deadlines = self._core.deadlines
        now = time.monotonic()
        if now >= deadlines.first:
            survive(log, "the timers (reports, heartbeats, kills)", lambda: self._core.timers(now))
            self._carry_out()
        return deadlines.first

    def close(self) -> None:
        self._executor.streams.close()
        self._link.close()
        if self._owns_context:
            self._context.term()
        self._host.close()

    def _switch(self, starting: bool = False) -> bool:
        """Apply the switch that came, if it is to be obeyed; whether one was. ``starting``: a start runs
        beside the loop, and what the switch gives to send or carry out waits until it is done."""
        switch = self._link.switch()
        if switch is None or not self._core.masters.obeys(switch.leader_epoch, switch.type):
            return False
        self._apply(switch, starting)
        return True

    def _apply(self, switch: SlotSwitch, starting: bool) -> None:
        core, now = self._core, time.monotonic()
        plan = core.switch(switch, now)
        applied_ns, readings = self._executor.signal(plan)
        core.applied(switch, plan, applied_ns, readings, now)
        if (core.outbox or core.orders) and not starting:  # a report, now and then
            self._carry_out()

    def _finish_start(self) -> None:
        """Wait for the start under way beside the loop (noded/launch_thread.py), applying the switches that
        come meanwhile (each after the columns sent before it) and nothing else: every other message, exit
        and timer waits, as it would behind a launch carried out here. The task then runs or is stopped as
        the order said, or, where a switch came since, as the last switch says."""
        executor, switched = self._executor, False
        while executor.starting is not None:
            ready = dict(self._starting.poll())
            if self._link.sub in ready:
                try:
                    self._columns_first()
                    switched = self._switch(starting=True) or switched
                except Exception:
                    log.exception("the switch failed; the daemon goes on")
            if executor.start_fd in ready:
                order, _ = executor.starting
                executor.started(self._core.runs(order.spec.job_id) if switched else order.runnable)

    def _receive_all(self) -> None:
        waiting = self._waiting
        waiting.extend(self._link.messages())
        while waiting:
            # a switch that came goes before the launches still to carry out (each a spawn and a cgroup
            # made): in a flood of short jobs they held it back by milliseconds
            if has_message(self._link.sub):
                self._columns_first()
                self._switch()
                continue  # the columns may have been all that waited
            self._handle(waiting.popleft())

    def _columns_first(self) -> None:
        """A switch came: the columns the master sent before it are read first (a column changes nothing
        until a switch reads it, and makes no order); the other messages wait their turn."""
        waiting = self._waiting
        waiting.extend(self._link.messages())
        for column in [message for message in waiting if isinstance(message, NodeColumn)]:
            waiting.remove(column)
            try:
                self._core.message(column, time.monotonic())
            except Exception:
                log.exception("handling %s failed", column.type)

    def _handle(self, message: Message) -> None:
        try:
            self._core.message(message, time.monotonic())
        except Exception:
            log.exception("handling %s failed", message.type)
        # now, not after the rest: a kill that follows a launch must find its task
        self._carry_out()

    def _carry_out(self) -> None:
        """Send what the core has to send and carry out its orders; then feed it what came of them (the
        executor's events), which may give it more of both."""
        core, executor = self._core, self._executor
        outbox, orders, events = core.outbox, core.orders, executor.events
        while outbox or orders or events:
            while outbox:
                self._link.send(*outbox.popleft())
            while orders:
                order = orders.popleft()
                if isinstance(order, Connect):
                    self._link.connect(order.welcome)
                    for message in order.then:
                        self._link.send(Route.REPORTS, message)
                elif isinstance(order, UseMaster):
                    self._link.use_master(order.endpoint)
                else:
                    try:  # each alone, as survive() does, without a closure for each on the switch path
                        executor.carry_out(order)
                    except Exception:
                        log.exception("carrying out %s failed; the daemon goes on", type(order).__name__)
                    if executor.starting is not None:  # a launch, started beside the loop
                        self._finish_start()
            while events:
                event = events.popleft()
                try:
                    core.task_event(event, time.monotonic())
                except Exception:
                    log.exception("handling %s failed; the daemon goes on", type(event).__name__)

    def _hello(self) -> NodeHello:
        """What this node says of itself in every hello; the core adds its tasks and exits."""
        settings = self._settings
        low, _, high = settings.peer_ports.partition("-")
        ports = (int(low), int(high or low))
        # ipc: a folder every account may pass through (the run folder, where it has one), in which each
        # job's user has a folder of their own for its rank 0's sockets
        peer = PeerEndpoint(transport="ipc", host=str(settings.run_dir or settings.spool()), ports=ports) \
            if settings.peer_transport == "ipc" else PeerEndpoint(transport="tcp", host=settings.peer_host, ports=ports)
        host = host_memory()
        return NodeHello(node=self.name, cpu_share=settings.cpu_share, processors=settings.processors, pid=os.getpid(),
                         incarnation=uuid.uuid4().hex, peer=peer, relay=self._link.relay_endpoints,
                         mpi=self._executor.process_managers.served,
                         memory=settings.memory or max(1, host - settings.memory_reserve), host_memory=host)


def poll_ms(due: float) -> int:
    """A poll's timeout that ends just past ``due`` (monotonic seconds), never before it; -1: none is due."""
    if due == math.inf:
        return -1
    return max(0, int((due - time.monotonic()) * 1000) + 1)


def run_node(settings: NodeSettings) -> None:
    try:
        daemon = NodeDaemon(settings)
    except (CurveError, ContainmentError, MissingTool) as error:
        log.error("%s", error)
        raise SystemExit(2) from None
    daemon.run()
