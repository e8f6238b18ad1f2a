"""The node daemon's decisions, without sockets or processes (docs/architecture.md, 'The node's core').

Every public method is one event: a message from the master, a switch, what
the mechanism reports of a task (``task_event``: launched, exited, found
running while descheduled, its memory read, a PMI barrier entered), timers
due, all with the clock passed in. The core answers with messages to send
(``outbox``: each with its route, the master's DEALER or the report PUSH) and
orders for the tasks (``orders``: noded/orders.py), which ``noded/loop.py``
takes and carries out, as it does the master core's ``outbox``; what carrying
them out brings (noded/task_events.py) the loop feeds back as events, never
while the orders are being drained. Its timers are data (``deadlines``: the
loop waits for the first). Tests drive it on a fake clock
(tests/test_node_core.py), as tests/test_master_core.py drives the master's.

Its parts: the column and what a switch stops and continues (``switching``),
the relay it is homed at (``upstream``), the masters it was given and the newest leader epoch it
obeys (``masters``), the tasks as it knows them
(``task_record``) and its timers (``deadlines``); here, registration and
heartbeats, report batching, exits until acknowledged, and the PMI fences.
"""

import logging
from collections import deque
from collections.abc import Callable
from enum import Enum, StrEnum
from typing import Any

from gangsched.noded import orders, task_events
from gangsched.noded.deadlines import Deadlines
from gangsched.noded.enforcement import DeschedulingWatch
from gangsched.noded.masters import Masters
from gangsched.noded.memory_watch import passed_limit
from gangsched.noded.switching import ColumnSwitcher, SwitchPlan, samples
from gangsched.noded.task_record import MemoryReading, TaskKey, TaskRecord, World
from gangsched.noded.upstream import Upstream
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import (
    MAX_REPORT_QUANTA,
    CheckpointTask,
    ErrorReply,
    ExitAck,
    Heartbeat,
    KillTask,
    LaunchTask,
    Message,
    NodeColumn,
    NodeHello,
    NodeWelcome,
    NotLeader,
    PmiFence,
    PmiFenceDone,
    PmixModexReply,
    PmixModexRequest,
    QuantumAccount,
    QuantumReport,
    SignalTask,
    SlotSwitch,
    TaskExit,
)
from gangsched.protocol.records import TaskRef

log = logging.getLogger("gangsched.noded")

_HELLO_HEARTBEAT_MS = 500  # until the master's welcome says otherwise
# exits a hello carries, the first of those not acknowledged: a hello fits in what the master's ROUTER takes
# (protocol/frames.py, MAX_ROUTER_BYTES) however many tasks ended while no master answered; the rest follow
# the welcome on the report route
HELLO_EXITS = 256
_ERROR_CHARACTERS = 1000  # of why a task failed, in its exit
# looks for a stopped task's new processes in one wake-up: a chain of forks that outruns them is
# looked at again after the next switch, and its processes stay stopped as each look finds them
LOOKS_PER_WAKE = 3


class Route(Enum):
    MASTER = "master"  # the DEALER: hellos, which the master answers; small, as the master's ROUTER takes them
    # the PUSH: reports, heartbeats, exits and what process managers send (fences of megabytes), kept in order
    REPORTS = "reports"


class Timer(StrEnum):  # a str's hash, not Enum's in Python: the switch path sets timers
    HEARTBEAT = "heartbeat"  # a heartbeat, or a hello while the master does not know this node
    REPORT = "report"  # accounts held back until the other nodes applied the switch
    NEW_PROCESSES = "new-processes"  # look for the processes the tasks a switch stopped started since
    RELAY = "relay"  # the relay's silence is looked at: lost, or looked at again when it may be
    MEMORY = "memory"  # the tasks' memory is read, every heartbeat period while tasks run
    DESCHEDULED = "descheduled"  # descheduled tasks are looked at, where they are watched rather than frozen


class NodeCore:
    def __init__(self, hello: NodeHello, kill_grace_s: float, report_delay_ms: int, forks: bool,
                 watch_interval_s: float | None = None, masters: tuple[str, ...] = ()) -> None:
        """``hello``: what this node says of itself (its tasks, exits and left relay are filled in at
        each hello); ``forks``: its tasks are processes that can start others, which a switch's
        signals must reach; ``watch_interval_s``: how often to look for descheduled tasks that run
        anyway, where they are not frozen (None: they are); ``masters``: the masters' endpoints, where
        several share a store (noded/masters.py)."""
        self.name = hello.node
        self._hello = hello
        self._kill_grace_s = kill_grace_s
        self._report_delay_s = report_delay_ms / 1000
        self._forks = forks
        self.tasks: dict[TaskKey, TaskRecord] = {}
        self.registered = False
        self._refused = ""  # why the master refused this node's hello, as last said
        self._heartbeat_s = _HELLO_HEARTBEAT_MS / 1000
        self.masters = Masters(masters)
        self._upstream = Upstream(watch_master=self.masters.several)
        self._switcher = ColumnSwitcher()
        self._watch = DeschedulingWatch(watch_interval_s)
        self._accounts: list[QuantumAccount] = []  # measured at each switch, sent once report_every are held
        self._new_processes_of: set[TaskKey] = set()  # the stopped tasks to look at for new processes
        self._unacknowledged: dict[TaskKey, TaskExit] = {}  # resent with every hello until acknowledged
        self._fences: dict[World, PmiFence] = {}  # by job and step: sent to the master, not answered yet
        self._welcomed = 0  # welcomes had, from any master (NodeHello.welcomed)
        self.deadlines = Deadlines()  # its timers: the loop waits until ``deadlines.first``
        self.deadlines.set(Timer.HEARTBEAT, 0.0)  # a hello at once
        # what it answers, for the loop to take from the left: messages with their route, orders for the tasks
        self.outbox: deque[tuple[Route, Message]] = deque()
        self.orders: deque[orders.Order] = deque()
        # each message type to the handler written for that type
        self._handlers: dict[type, Callable[[Any, float], None]] = {
            NodeWelcome: self._welcome,
            NodeColumn: lambda column, _: self._switcher.new_column(column),
            LaunchTask: self._launch,
            KillTask: self._kill,
            CheckpointTask: self._checkpoint,
            SignalTask: self._deliver,
            ExitAck: self._exit_acknowledged,
            PmiFenceDone: self._fence_done,
            PmixModexRequest: lambda message, _: self.orders.append(orders.ToProcessManager(message)),
            PmixModexReply: lambda message, _: self.orders.append(orders.ToProcessManager(message)),
            ErrorReply: self._error,
            NotLeader: self._not_leader,
        }

    # ------------------------------------------------------------ events

    def message(self, message: Message, now: float) -> None:
        """A message from the master (over the DEALER)."""
        handler = self._handlers.get(type(message))
        if handler is None:
            log.warning("ignored a %s message: not for a node", message.type)
            return
        epoch = getattr(message, "leader_epoch", None)
        if epoch is None or self.masters.obeys(epoch, message.type):
            handler(message, now)

    def switch(self, switch: SlotSwitch, now: float) -> SwitchPlan:
        """A switch came: what to stop and continue (the loop stops first), and which tasks ran."""
        self._upstream.heard_at = now  # the relay's timer, when due, sees it: no timer is set at every switch
        return self._switcher.plan(switch, self.tasks.values())

    def runs(self, job_id: int) -> bool:
        """Whether the last switch applied runs ``job_id`` here."""
        return self._switcher.runs(job_id)

    def applied(self, switch: SlotSwitch, plan: SwitchPlan, applied_ns: int,
                readings: list[tuple[int, int, int]], now: float) -> None:
        """The loop signalled ``plan`` by ``applied_ns`` and read the tasks that ran: (CPU ns, run-queue
        wait, barriers) each."""
        measured = samples(plan, applied_ns, readings)
        for task in plan.resume:
            self._watch.resumed(task)
        if plan.stop:
            self._watch_from(now)
        # where nodes share cores, what can wait does until the others have had time to apply the switch
        others_applied = now + self._report_delay_s
        # The stop signals went to the processes each task had at the last look; a look now gives those
        # it started since the same signal. Only a stopped task needs one: a running task's new processes
        # run as they should, and a stopped one starts none. It waits as a report does, and else runs in
        # this wake-up: a wake-up of its own, on a core whose caches the jobs have filled, cost as much
        # CPU as the switch. Tasks that are no processes (`gang bench scale`) start none.
        if self._forks:
            self._new_processes_of.update(task.key for task in plan.stop)
            if self._new_processes_of:
                self.deadlines.set(Timer.NEW_PROCESSES, others_applied)
        if not self.registered:
            return
        self._accounts.append(QuantumAccount(
            quantum=switch.quantum,
            switch_sent_ns=switch.sent_ns,
            switch_applied_ns=applied_ns,
            column_epoch=self._switcher.column.epoch,
            samples=measured,
        ))
        if len(self._accounts) == MAX_REPORT_QUANTA:  # as many as a report holds: none waits longer
            self._send_report(now)
        elif len(self._accounts) >= switch.report_every and self.deadlines.get(Timer.REPORT) is None:
            # sending costs a trip through the network stack: where nodes share cores, it may delay
            # the other nodes' switch
            self.deadlines.set(Timer.REPORT, others_applied)

    def task_event(self, event: task_events.TaskEvent, now: float) -> None:
        """What the mechanism reports of a task (noded/task_events.py)."""
        match event:
            case task_events.Launched(key, runnable, started_ns):
                self._launched(key, runnable, started_ns, now)
            case task_events.NotStarted(key, reason):
                self._report_exit(TaskExit(node=self.name, job_id=key.job_id, step=key.step, rank=key.rank,
                                           returncode=None, error=reason), now)
            case task_events.Exited():
                self._exited(event, now)
            case task_events.Escaped(key):
                self._escaped(key, now)
            case task_events.MemoryRead(key, reading):
                self._memory(key, reading, now)
            case task_events.StillForking(key):  # looked at again after the next switch
                self._new_processes_of.add(key)
            case task_events.ForMaster(message):
                self._for_master(message)
            case task_events.Failed(key):
                self.end(key, now)

    def _launched(self, key: TaskKey, runnable: bool, started_ns: int, now: float) -> None:
        """The loop started a task ``Launch`` asked for, running or stopped as it asked."""
        self.tasks[key] = TaskRecord(key, runnable, started_ns)
        # tasks that are processes hold memory (an emulated task of `gang bench scale` holds none: a
        # thousand daemons in a process reading it every heartbeat missed heartbeats under load)
        if self._forks and self.deadlines.get(Timer.MEMORY) is None:
            self.deadlines.set(Timer.MEMORY, now + self._heartbeat_s)
        if not runnable:
            self._watch_from(now)

    def _exited(self, exited: task_events.Exited, now: float) -> None:
        """A task ended (the loop reaped it): its exit goes to the master until acknowledged."""
        key = exited.key
        task = self.tasks.pop(key)
        self.deadlines.clear(key)
        self._new_processes_of.discard(key)
        if not any(other.world == key.world for other in self.tasks):
            self._fences.pop(key.world, None)  # the step's last task here: no barrier of it is waited for
        self._report_exit(TaskExit(node=self.name, job_id=key.job_id, step=key.step, rank=key.rank,
                                   returncode=exited.returncode,
                                   error=(task.violation or exited.error or "")[:_ERROR_CHARACTERS] or None,
                                   cpu_ns=exited.cpu_ns,
                                   progress=exited.progress, memory_peak=max(task.memory_peak, exited.memory.peak),
                                   out_of_memory=task.out_of_memory or exited.memory.out_of_memory), now)

    def _memory(self, key: TaskKey, reading: MemoryReading, now: float) -> None:
        """A task's memory as read every heartbeat period: its peak goes with its samples and its exit;
        one over its limit is killed, and its job ends OUT_OF_MEMORY (noded/memory_watch.py)."""
        task = self.tasks.get(key)
        if task is not None and passed_limit(task, reading):
            log.warning("%s passed its memory limit (peak %d bytes): killed", key, task.memory_peak)
            self._kill_now(task, now)

    def _escaped(self, key: TaskKey, now: float) -> None:
        """A look found a descheduled task running, and stopped it again (noded/enforcement.py)."""
        task = self.tasks.get(key)
        if task is None or task.runnable or task.leaving:
            return  # its turn came meanwhile, or it is ending anyway
        reason = self._watch.escaped(task)
        log.warning("%s ran while descheduled: stopped again (%d in this stretch)", key, task.escapes)
        if reason is not None:
            task.violation = reason
            self._kill_now(task, now)

    def _watch_from(self, now: float) -> None:
        """A task is descheduled: look at it in a watch interval, where descheduled tasks are watched."""
        interval = self._watch.interval_s
        if interval is not None and self.deadlines.get(Timer.DESCHEDULED) is None:
            self.deadlines.set(Timer.DESCHEDULED, now + interval)

    def _kill_now(self, task: TaskRecord, now: float) -> None:
        task.ending = True
        self.orders.append(orders.Kill(task.key))
        self.deadlines.set(task.key, now + self._heartbeat_s)  # and again, until its exit comes

    def end(self, key: TaskKey, now: float) -> None:
        """End a task (its job was cancelled or failed): SIGTERM, and SIGKILL once the grace is over."""
        task = self.tasks.get(key)
        if task is None or task.ending:
            return
        task.ending = True
        self.orders.append(orders.Terminate(key))
        self.deadlines.set(key, now + self._kill_grace_s)

    def end_all(self, now: float) -> None:
        """The daemon stops: every task is ended."""
        for key in list(self.tasks):
            self.end(key, now)

    def _for_master(self, message: PmiFence | PmixModexRequest | PmixModexReply) -> None:
        """A process-manager interface sends the master this: a fence of a job's ranks here, which the
        master gathers across the job's nodes (kept, and sent again with each welcome until answered),
        or a direct-modex request or reply, which it passes on to the node concerned."""
        if isinstance(message, PmiFence):
            self._fences[World.of(message)] = message
        self.outbox.append((Route.REPORTS, message))

    def timers(self, now: float) -> None:
        """Whatever of the timers is due at ``now``."""
        deadlines = self.deadlines
        due = deadlines.take_due(now)
        if Timer.REPORT in due:
            self._send_report(now)
        if Timer.NEW_PROCESSES in due:
            looking, self._new_processes_of = self._new_processes_of, set()
            # a process found now may have started another before its stop signal came: the task
            # is looked at again until a look finds nothing new, after the next switch if need be
            self.orders.extend(orders.CatchNewProcesses(key, LOOKS_PER_WAKE) for key in looking if key in self.tasks)
        for key in [key for key, task in self.tasks.items() if task.ending and key in due]:
            self.orders.append(orders.Kill(key))
            deadlines.set(key, now + self._heartbeat_s)  # and again, until its exit comes
        if Timer.DESCHEDULED in due and self._watch.interval_s is not None:
            held = frozenset(key for key, task in self.tasks.items() if not task.runnable and not task.leaving)
            if held:  # looked at until none is descheduled; a switch that stops one sets it again
                self.orders.append(orders.CheckDescheduled(held))
                deadlines.set(Timer.DESCHEDULED, now + self._watch.interval_s)
        if Timer.MEMORY in due and self.tasks:
            # not with the heartbeat's sweep: reports push the heartbeat on while tasks run
            self.orders.append(orders.ReadMemory(frozenset(self.tasks)))
            deadlines.set(Timer.MEMORY, now + self._heartbeat_s)
        if Timer.RELAY in due:
            lost_at = self._upstream.lost_at()
            if lost_at is not None and now < lost_at:  # a switch came since it was set
                deadlines.set(Timer.RELAY, lost_at)
            elif lost_at is not None and self.registered:
                self._upstream.leave(now)
                self.masters.lost()
                self.registered = False
                deadlines.set(Timer.HEARTBEAT, now)  # a hello at once
        # taken as due, or made due by a relay lost just above; not one a report just pushed on
        heartbeat = deadlines.get(Timer.HEARTBEAT)
        if heartbeat is None or heartbeat <= now:
            deadlines.set(Timer.HEARTBEAT, now + self._heartbeat_s)
            self.orders.append(orders.ReapStrays(frozenset(self.tasks)))
            if self.registered:
                self.outbox.append((Route.REPORTS, Heartbeat(node=self.name, stale_refused=self.masters.stale_refused)))
            else:
                self._say_hello(now)

    # ------------------------------------------------------------ the master's messages

    def _welcome(self, welcome: NodeWelcome, now: float) -> None:
        self.registered = True
        self._welcomed += 1
        self.masters.answered()
        self._heartbeat_s = welcome.heartbeat_ms / 1000
        self._upstream.welcomed(welcome, now)
        lost_at = self._upstream.lost_at()
        if lost_at is None:
            self.deadlines.clear(Timer.RELAY)
        else:
            self.deadlines.set(Timer.RELAY, lost_at)
        # the next hello was due up to 0.5 s on: the master counts silence from now, at its own period
        heartbeat = self.deadlines.get(Timer.HEARTBEAT)
        if heartbeat is None or heartbeat > now + self._heartbeat_s:
            self.deadlines.set(Timer.HEARTBEAT, now + self._heartbeat_s)
        beyond = list(self._unacknowledged.values())[HELLO_EXITS:]  # the hello's room: the rest go this way
        self.orders.append(orders.Connect(welcome, (*self._fences.values(), *beyond)))

    def _launch(self, message: LaunchTask, now: float) -> None:
        spec = message.task
        key = TaskKey.of(spec)
        # a launch sent again after a hello that crossed it: the task runs, or ran and its exit
        # is on its way to the master; either way it must not start twice
        if key in self.tasks or key in self._unacknowledged:
            log.info("%s runs or ran here; launch ignored", key)
            return
        self.orders.append(orders.Launch(spec, self._switcher.starts_running(spec.job_id, message.run_in)))

    def _kill(self, message: KillTask, now: float) -> None:
        keys = [key for key, task in self.tasks.items() if key.job_id == message.job_id and not task.ending
                and message.step in (None, key.step)]
        if keys:
            log.info("ending job %d%s: %s", message.job_id, "" if message.step is None else f" step {message.step}",
                     message.reason)
        for key in keys:
            self.end(key, now)

    def srun_gone(self, job_id: int, step: int, now: float) -> None:
        """The srun a step's streams went to is gone (killed, its host lost): its tasks here end, as Slurm's
        do, and leave nothing running or frozen."""
        self._kill(KillTask(job_id=job_id, step=step, reason="its srun is gone"), now)

    def _deliver(self, message: SignalTask, now: float) -> None:
        keys = [key for key, task in self.tasks.items() if key.job_id == message.job_id and not task.ending
                and (message.steps is None or key.step in message.steps)]
        log.info("signal %d to job %d: %s", message.signal, message.job_id, ", ".join(map(str, keys)) or "no task")
        self.orders.extend(orders.Deliver(key, message.signal, message.whole) for key in keys)

    def _checkpoint(self, message: CheckpointTask, now: float) -> None:
        for key, task in self.tasks.items():
            if key.job_id == message.job_id and key.step == 0 and not task.leaving:
                log.info("%s checkpoints to migrate", key)
                task.checkpointing = True
                task.runnable = True  # it runs to its next barrier, where it saves its state
                self.orders.append(orders.Checkpoint(key))

    def _exit_acknowledged(self, ack: ExitAck, now: float) -> None:
        self._unacknowledged.pop(TaskKey.of(ack), None)

    def _fence_done(self, message: PmiFenceDone, now: float) -> None:
        world = World.of(message)
        fence = self._fences.get(world)
        if fence is not None and fence.epoch == message.epoch:
            del self._fences[world]
        self.orders.append(orders.ToProcessManager(message))

    def _error(self, error: ErrorReply, now: float) -> None:
        self.masters.answered()
        if error.code is ErrorCode.UNKNOWN_NODE:
            if self.registered:
                log.warning("the master does not know this node (restarted?): registering again")
            self.registered = False
            self.deadlines.set(Timer.HEARTBEAT, now)  # a hello at once
        elif error.code is ErrorCode.NODE_REFUSED:
            if error.reason != self._refused:  # it says hello again every heartbeat: said once is enough
                log.error("the master refuses this node (node_refused): %s", error.reason)
            self._refused = error.reason
        else:
            log.warning("the master refused a message: %s: %s", error.code, error.reason)

    def connected(self, now: float) -> None:
        """The DEALER connected to the master anew: one that restarted knows nothing of this node, and one
        that lost the connection for a moment may have missed what it sent; the master routes to this
        daemon only once a hello said where it is. A hello at once, as when the master says it does not
        know this node (a repeated hello of the same daemon is taken as such)."""
        self.registered = False
        self.deadlines.set(Timer.HEARTBEAT, now)

    def _not_leader(self, answer: NotLeader, now: float) -> None:
        if self.registered:
            log.warning("%s stands by: looking for the leader", answer.master)
        self.registered = False
        moved = self.masters.not_leader(answer.leader)
        if moved is not None:
            self.orders.append(orders.UseMaster(moved))
            self.deadlines.set(Timer.HEARTBEAT, now)  # a hello to the leader at once

    # ------------------------------------------------------------ what goes to the master

    def _say_hello(self, now: float) -> None:
        moved = self.masters.hello_to(now)
        if moved is not None:
            self.orders.append(orders.UseMaster(moved))
        self.outbox.append((Route.MASTER, self._hello_now()))

    def _report_exit(self, exit_: TaskExit, now: float) -> None:
        self._unacknowledged[TaskKey.of(exit_)] = exit_
        if self.registered:
            self._send_report(now)  # the task's last quanta before its exit, which ends its job's accounts
            self.outbox.append((Route.REPORTS, exit_))

    def _send_report(self, now: float) -> None:
        self.deadlines.clear(Timer.REPORT)
        if self._accounts:
            self.outbox.append((Route.REPORTS, QuantumReport(node=self.name, accounts=self._accounts)))
            self._accounts = []
            self.deadlines.set(Timer.HEARTBEAT, now + self._heartbeat_s)  # a report proves life

    def _hello_now(self) -> NodeHello:
        return self._hello.model_copy(update={
            "tasks": [TaskRef(job_id=job_id, step=step, rank=rank) for job_id, step, rank in self.tasks],
            "exits": list(self._unacknowledged.values())[:HELLO_EXITS],
            "left_relay": self._upstream.left,
            "welcomed": self._welcomed,
        })
