"""The node daemon's loop: register, launch tasks, apply switches, report quanta.

The switch path (``_apply``) is the hot path: the node's column of the matrix
and the switch say which tasks to stop and continue (noded/switching.py); the
samples of the tasks that ran make the report for the quantum that ended, sent
a little later.

Its tasks run on a ``TaskHost`` (noded/task_host.py): real processes, or
`gang bench scale`'s emulation. Task exits arrive on each task's pidfd; an
exit is resent with every hello until the master acknowledges it, so a master
restart loses none. An MPI task's PMI lines arrive on the daemon's end of its
PMI_FD socket and are served by ``PmiService`` (noded/pmi_service.py); a
barrier of a job on several nodes goes through the master (``PmiFence``).

The hello goes over the DEALER, which also brings the master's orders and
answers; reports, heartbeats and exits go over a PUSH socket to the master's
PULL socket, which the master reads once a quantum. One socket keeps them in
order, so no exit overtakes the last report of its task. Where the master homes the
node at a relay (another node, noded/relay.py), the SUB and PUSH connect there instead;
a node the master makes a relay forwards switches and the other nodes' messages.
"""

import logging
import os
import signal
import time
import uuid
from collections.abc import Callable
from typing import Any

import zmq

from gangsched.daemon.curve import NODE_USER, CurveError, KeyFolder
from gangsched.daemon.endpoints import connectable
from gangsched.daemon.logs import survive
from gangsched.daemon.realtime import freeze_start_up_objects, raise_priority, zmq_context
from gangsched.daemon.signals import SignalEvents
from gangsched.daemon.sockets import has_message
from gangsched.noded.containment import ContainmentError
from gangsched.noded.pmi_service import PmiService
from gangsched.noded.relay import NodeRelay, Upstream
from gangsched.noded.settings import NodeSettings
from gangsched.noded.switching import ColumnSwitcher
from gangsched.noded.task_host import NodeTask, ProcessHost, TaskHost
from gangsched.noded.tasks import LaunchError
from gangsched.protocol.codec import decode, encode
from gangsched.protocol.frames import MAX_MESSAGE_BYTES
from gangsched.protocol.errors import ErrorCode, ProtocolError
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
    PmiFenceDone,
    QuantumAccount,
    QuantumReport,
    SlotSwitch,
    TaskExit,
)
from gangsched.protocol.records import PeerEndpoint, TaskRef

log = logging.getLogger("gangsched.noded")

_HELLO_HEARTBEAT_MS = 500  # until the master's welcome says otherwise
# A connection attempt to a host that is gone (a master container restarting, a
# host rebooting) gets no refusal: it waits out SYN retries of 1 s, then 3 s. Far
# above a cluster network's round trip, this makes the node try again at once.
_CONNECT_TIMEOUT_MS = 250
_LAST_EXITS_LINGER_MS = 1000
# looks for a stopped task's new processes in one wake-up: a chain of forks that outruns them is
# looked at again after the next switch, and its processes stay stopped as each look finds them
_LOOKS_PER_WAKE = 3


class NodeDaemon:
    def __init__(self, settings: NodeSettings, host: TaskHost | None = None,
                 context: zmq.Context[zmq.Socket[bytes]] | None = None, poller: zmq.Poller | None = None) -> None:
        """``host``, ``context`` and ``poller``: given where one process runs many daemons (`gang bench
        scale`), which then share one I/O thread and one poll, and step each (``step``) in turn."""
        self._settings = settings
        self.name = settings.name
        self._spool = settings.spool()
        self._spool.mkdir(parents=True, exist_ok=True)
        self._host = host or ProcessHost(self.name, self._spool, settings.containment)
        log.info("tasks are held by %s", self._host.description)
        priority = settings.realtime_priority
        realtime = priority > 0 and raise_priority(priority, log)
        self._owns_context = context is None
        self._context = context or zmq_context(priority if realtime else None)
        self._keys = KeyFolder(settings.keys) if settings.keys is not None else None
        self._dealer = self._socket(zmq.DEALER)
        self._dealer.setsockopt(zmq.ROUTING_ID, self.name.encode())  # the master's name for it
        self._dealer.connect(settings.master)
        # the master's welcome says where to connect these two
        self._sub = self._socket(zmq.SUB)
        self._sub.setsockopt(zmq.CONFLATE, 1)  # a late node jumps to the newest decision
        self._sub.setsockopt(zmq.SUBSCRIBE, b"")
        self._push = self._socket(zmq.PUSH)
        self._endpoints: dict[zmq.Socket[bytes], str] = {}
        self._poller = poller or zmq.Poller()
        self._poller.register(self._dealer, zmq.POLLIN)
        self._poller.register(self._sub, zmq.POLLIN)
        self._tasks: dict[tuple[int, int], NodeTask] = {}  # by (job id, rank)
        self._by_pidfd: dict[int, NodeTask] = {}
        self._relay = NodeRelay.open(self._context, self._spool, self._keys,
                                     settings.peer_host if settings.peer_transport == "tcp" else None) \
            if settings.relay else None
        if self._relay is not None:
            self._poller.register(self._relay.pull, zmq.POLLIN)
        self._upstream = Upstream()
        self._pmi = PmiService(self.name, self._poller, self._tasks, lambda fence: self._send(self._dealer, fence),
                               self._terminate)
        self._processor_cores = settings.processor_cores()
        self._switcher = ColumnSwitcher()
        self._unacknowledged: dict[tuple[int, int], TaskExit] = {}
        self._registered = False
        self._incarnation = uuid.uuid4().hex
        self._master_unreachable = False
        self._heartbeat_s = _HELLO_HEARTBEAT_MS / 1000
        self._next_heartbeat = 0.0
        # the quanta's accounts, measured at each switch and sent once the switch's report_every are held
        self._accounts: list[QuantumAccount] = []
        self._report_due: float | None = None
        self._look_due: float | None = None  # when to look for processes the tasks started
        self._to_look: set[tuple[int, int]] = set()  # the tasks to look at then, by (job id, rank)
        # each message type to the handler written for that type
        self._handlers: dict[type, Callable[[Any], None]] = {
            NodeWelcome: self._welcome,
            NodeColumn: self._switcher.new_column,
            LaunchTask: self._launch,
            KillTask: self._kill,
            CheckpointTask: self._checkpoint,
            ExitAck: self._exit_acknowledged,
            PmiFenceDone: self._pmi.fence_done,
            ErrorReply: self._error,
        }

    def run(self) -> None:
        with SignalEvents([signal.SIGTERM, signal.SIGINT]) as signals:
            self._poller.register(signals.fileno(), zmq.POLLIN)
            freeze_start_up_objects()
            due = self._next_timer()
            while True:
                ready = dict(self._poller.poll(poll_ms(due)))
                if signals.fileno() in ready and signals.drain():
                    log.info("shutting down: ending %d tasks", len(self._tasks))
                    break
                due = self.step(ready)
        self._end_all_tasks()
        self.close()

    @property
    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        """The sockets it polls: the master's messages, switches, and nodes' messages to relay."""
        if self._relay is None:
            return self._dealer, self._sub
        return self._dealer, self._sub, self._relay.pull

    def step(self, ready: dict[Any, int]) -> float:
        """Handle what ``ready`` (a poll's result) holds for this daemon, then its timers; when they next
        fall due (monotonic seconds)."""
        # each step alone: one that fails is logged, and the others and the loop go on;
        # the master's messages first, as a new column goes out before the switch that needs it
        if self._dealer in ready:
            survive(log, "reading the master's messages", self._receive_all)
        if self._sub in ready:
            survive(log, "the switch", self._switch)
        if self._relay is not None and self._relay.pull in ready:
            relay = self._relay
            survive(log, "relaying node messages", lambda: relay.forward_messages(self._push))
        for task in self._pmi.ready(ready):
            survive(log, f"job {task.job_id} rank {task.rank}'s PMI", lambda: self._pmi.readable(task))
        for task in [self._by_pidfd[fd] for fd in ready if fd in self._by_pidfd]:
            survive(log, f"job {task.job_id} rank {task.rank}'s exit", lambda: self._exited(task))
        # most wake-ups are a switch's, with no timer due: at a thousand daemons a process (`gang bench
        # scale`) spent a fifth of each one's switch going through timers that were not due
        due = self._next_timer()
        if time.monotonic() >= due:
            survive(log, "the timers (reports, heartbeats, kills)", self._on_timers)
            due = self._next_timer()
        return due

    def close(self) -> None:
        # the last exits are on their way on the PUSH socket: a short linger lets them reach the master,
        # which otherwise learns of them only when it misses this node or hears from its next daemon
        self._push.close(linger=_LAST_EXITS_LINGER_MS)
        for socket in self.sockets:
            self._poller.unregister(socket)
        self._dealer.close()
        self._sub.close()
        if self._relay is not None:
            self._relay.close()
        if self._owns_context:
            self._context.term()
        self._host.close()

    def _socket(self, kind: int) -> zmq.Socket[bytes]:
        socket = self._context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.CONNECT_TIMEOUT, _CONNECT_TIMEOUT_MS)
        socket.setsockopt(zmq.MAXMSGSIZE, 2 * MAX_MESSAGE_BYTES)
        if self._keys is not None:
            self._keys.connect_as(socket, NODE_USER)
        return socket

    # ------------------------------------------------------------ the switch path

    def _switch(self) -> None:
        try:
            frame = self._sub.recv(zmq.NOBLOCK)  # CONFLATE: only the newest
        except zmq.Again:
            return
        if self._relay is not None:
            self._relay.forward_switch(frame)  # first: the relayed nodes wait on it
        try:
            switch = decode(frame)
        except ProtocolError as error:
            log.warning("bad switch message: %s", error)
            return
        if isinstance(switch, SlotSwitch):
            self._apply(switch)

    def _apply(self, switch: SlotSwitch) -> None:
        applied_ns, samples = self._switcher.apply(switch, self._tasks.values())
        now = time.monotonic()
        self._upstream.heard(now)
        # where nodes share cores, what can wait does until the others have had time to apply the switch
        others_applied = now + self._settings.report_delay_ms / 1000
        # The stop signals went to the processes each task had at the last look; a look now gives those
        # it started since the same signal. Only a stopped task needs one: a running task's new processes
        # run as they should, and a stopped one starts none. It waits as a report does, and else runs in
        # this wake-up: a wake-up of its own, on a core whose caches the jobs have filled, cost as much
        # CPU as the switch. Tasks that are no processes (`gang bench scale`) start none.
        if self._host.forks:
            self._to_look.update((task.job_id, task.rank) for task in self._switcher.stopped)
            if self._to_look:
                self._look_due = others_applied
        if self._registered:
            self._accounts.append(QuantumAccount(
                quantum=switch.quantum,
                switch_sent_ns=switch.sent_ns,
                switch_applied_ns=applied_ns,
                column_epoch=self._switcher.column.epoch,
                samples=samples,
            ))
            if len(self._accounts) == MAX_REPORT_QUANTA:  # as many as a report holds: none waits longer
                self._send_report()
            elif len(self._accounts) >= switch.report_every and self._report_due is None:
                # sending costs a trip through the network stack: where nodes share cores, it may delay
                # the other nodes' switch
                self._report_due = others_applied

    # ------------------------------------------------------------ messages from the master

    def _receive_all(self) -> None:
        while has_message(self._dealer):
            try:
                message = decode(self._dealer.recv())
            except ProtocolError as error:
                log.warning("bad message from the master: %s", error)
                continue
            handler = self._handlers.get(type(message))
            if handler is None:
                log.warning("ignored a %s message: not for a node", message.type)
                continue
            try:
                handler(message)
            except Exception:
                log.exception("handling %s failed", message.type)

    def _welcome(self, welcome: NodeWelcome) -> None:
        self._registered = True
        self._heartbeat_s = welcome.heartbeat_ms / 1000
        self._upstream.welcomed(welcome, time.monotonic())
        if self._relay is not None:
            self._relay.serving = welcome.relays
        # the next hello was due up to 0.5 s on: the master counts silence from now, at its own period
        self._next_heartbeat = min(self._next_heartbeat, time.monotonic() + self._heartbeat_s)
        switches = self._follow(self._sub, welcome.switch_endpoint)
        reports = self._follow(self._push, welcome.report_endpoint)
        log.info("registered with the master%s; switches from %s, reports to %s",
                 f" through relay {welcome.via}" if welcome.via else "", switches, reports)
        for fence in self._pmi.pending_fences():
            self._send(self._dealer, fence)

    def _follow(self, socket: zmq.Socket[bytes], bound: str) -> str:
        """Connect ``socket`` to the master's ``bound`` endpoint, leaving the one it had."""
        endpoint = connectable(bound, self._settings.master)
        previous = self._endpoints.get(socket)
        if endpoint != previous:
            if previous is not None:
                socket.disconnect(previous)
            if self._keys is not None:  # a relay presents the nodes' key, the master its own
                socket.curve_serverkey = self._keys.server_key(relay=self._upstream.via is not None)
            socket.connect(endpoint)
            self._endpoints[socket] = endpoint
        return endpoint

    def _launch(self, message: LaunchTask) -> None:
        spec = message.task
        # a launch sent again after a hello that crossed it: the task runs, or ran and its exit
        # is on its way to the master; either way it must not start twice
        if (spec.job_id, spec.rank) in self._tasks or (spec.job_id, spec.rank) in self._unacknowledged:
            log.info("job %d rank %d runs or ran here; launch ignored", spec.job_id, spec.rank)
            return
        cores = self._processor_cores[spec.processor % len(self._processor_cores)]
        try:
            spools = (self._spool, self._settings.user_spool_dir)
            task = self._host.launch(spec, self.name, spools, self._switcher.runs(spec.job_id), cores)
        except (OSError, ValueError, LaunchError) as error:
            log.warning("job %d rank %d cannot start: %s", spec.job_id, spec.rank, error)
            self._report_exit(spec.job_id, spec.rank, None, f"could not start: {error}")
            return
        except Exception as error:  # a job that never starts must not stay RUNNING for ever
            log.exception("job %d rank %d: launching failed", spec.job_id, spec.rank)
            self._report_exit(spec.job_id, spec.rank, None, f"could not start: internal error of node {self.name}: "
                              f"{type(error).__name__}: {error}")
            return
        self._tasks[(spec.job_id, spec.rank)] = task
        self._by_pidfd[task.pidfd] = task
        self._poller.register(task.pidfd, zmq.POLLIN)
        if task.pmi is not None:
            self._pmi.attach(task, message)
        log.info("job %d rank %d started as pid %d", spec.job_id, spec.rank, task.pid)

    def _tasks_of(self, job_id: int) -> list[NodeTask]:
        return [task for task in self._tasks.values() if task.job_id == job_id]

    def _kill(self, message: KillTask) -> None:
        tasks = [task for task in self._tasks_of(message.job_id) if task.kill_deadline is None]
        if tasks:
            log.info("ending job %d: %s", message.job_id, message.reason)
        for task in tasks:
            self._terminate(task)

    def _checkpoint(self, message: CheckpointTask) -> None:
        for task in self._tasks_of(message.job_id):
            if not task.leaving:
                log.info("job %d rank %d checkpoints to migrate", task.job_id, task.rank)
                task.checkpoint()

    def _terminate(self, task: NodeTask) -> None:
        self._pmi.ending(task)
        task.terminate(self._settings.kill_grace_s)

    def _exit_acknowledged(self, ack: ExitAck) -> None:
        self._unacknowledged.pop((ack.job_id, ack.rank), None)

    def _error(self, error: ErrorReply) -> None:
        if error.code is ErrorCode.UNKNOWN_NODE:
            if self._registered:
                log.warning("the master does not know this node (restarted?): registering again")
            self._registered = False
            self._next_heartbeat = 0.0  # say hello at once
        else:
            log.warning("the master refused a message: %s: %s", error.code, error.reason)

    # ------------------------------------------------------------ tasks and timers

    def _exited(self, task: NodeTask) -> None:
        self._poller.unregister(task.pidfd)
        del self._by_pidfd[task.pidfd]
        del self._tasks[(task.job_id, task.rank)]
        progress = task.read_progress()
        cpu_ns = task.take_cpu_ns()  # the zombie's clock still reads until reaped
        returncode = task.reap()
        self._host.ended(task)
        log.info("job %d rank %d exited with %d", task.job_id, task.rank, returncode)
        error = self._pmi.exited(task, returncode, task.failure)
        self._report_exit(task.job_id, task.rank, returncode, error, cpu_ns, progress)

    def _report_exit(
        self, job_id: int, rank: int, returncode: int | None, error: str | None,
        cpu_ns: int = 0, progress: int = 0,
    ) -> None:
        exit_ = TaskExit(node=self.name, job_id=job_id, rank=rank, returncode=returncode,
                         error=error, cpu_ns=cpu_ns, progress=progress)
        self._unacknowledged[(job_id, rank)] = exit_
        if self._registered:
            self._send_report()  # the task's last quanta before its exit, which ends its job's accounts
            self._send(self._push, exit_)

    def _send_report(self) -> None:
        self._report_due = None
        if self._accounts:
            self._send(self._push, QuantumReport(node=self.name, accounts=self._accounts))
            self._accounts = []
            self._next_heartbeat = time.monotonic() + self._heartbeat_s  # a report proves life

    def _on_timers(self) -> None:
        now = time.monotonic()
        if self._report_due is not None and now >= self._report_due:
            self._send_report()
        if self._look_due is not None and now >= self._look_due:
            self._look_due = None
            looking, self._to_look = self._to_look, set()
            for key in looking:
                task = self._tasks.get(key)
                if task is None:
                    continue
                # a process found now may have started another before its stop signal came: the task
                # is looked at again until a look finds nothing new, after the next switch if need be
                for _ in range(_LOOKS_PER_WAKE):
                    if not task.follow():
                        break
                else:
                    self._to_look.add(key)
        for task in self._tasks.values():
            if task.kill_deadline is not None and now >= task.kill_deadline:
                task.kill()
        relay_lost_at = self._upstream.lost_at()
        if self._registered and relay_lost_at is not None and now >= relay_lost_at:
            self._upstream.leave(now)
            self._registered, self._next_heartbeat = False, now  # say hello at once
        if now >= self._next_heartbeat:
            self._next_heartbeat = now + self._heartbeat_s
            self._host.sweep({(task.job_id, task.rank) for task in self._tasks.values()})
            if self._registered:
                self._send(self._push, Heartbeat(node=self.name))
            else:
                self._send(self._dealer, self._hello())

    def _next_timer(self) -> float:
        """When the first of its timers falls due (monotonic seconds): ``_on_timers`` has nothing to do before."""
        deadline = self._next_heartbeat
        if self._report_due is not None:
            deadline = min(deadline, self._report_due)
        if self._look_due is not None:
            deadline = min(deadline, self._look_due)
        relay_lost_at = self._upstream.lost_at()
        if self._registered and relay_lost_at is not None:
            deadline = min(deadline, relay_lost_at)
        for task in self._tasks.values():
            if task.kill_deadline is not None:
                deadline = min(deadline, task.kill_deadline)
        return deadline

    def _hello(self) -> NodeHello:
        return NodeHello(
            node=self.name,
            cpus=self._settings.cpus,
            processors=self._settings.processors,
            pid=os.getpid(),
            incarnation=self._incarnation,
            peer=self._peer(),
            tasks=[TaskRef(job_id=t.job_id, rank=t.rank) for t in self._tasks.values()],
            exits=list(self._unacknowledged.values()),
            relay=self._relay.endpoints if self._relay is not None else None,
            left_relay=self._upstream.left,
        )

    def _peer(self) -> PeerEndpoint:
        low, _, high = self._settings.peer_ports.partition("-")
        ports = (int(low), int(high or low))
        if self._settings.peer_transport == "ipc":
            return PeerEndpoint(transport="ipc", host=str(self._spool), ports=ports)
        return PeerEndpoint(transport="tcp", host=self._settings.peer_host, ports=ports)

    def _send(self, socket: zmq.Socket[bytes], message: Message) -> None:
        try:
            socket.send(encode(message), zmq.NOBLOCK)
        except zmq.Again:
            if not self._master_unreachable:
                log.warning("master unreachable: messages are dropped until it answers")
            self._master_unreachable = True
            return
        if self._master_unreachable:
            log.info("master reachable again")
            self._master_unreachable = False

    def _end_all_tasks(self) -> None:
        """Leave nothing behind: SIGTERM and continue every group, SIGKILL after the grace."""
        for task in self._tasks.values():
            self._terminate(task)
        deadline = time.monotonic() + self._settings.kill_grace_s
        # only the tasks' pidfds: an unread message would make every poll return at once, and
        # a real-time daemon spinning until the grace ends starves the machine
        exits = zmq.Poller()
        for pidfd in self._by_pidfd:
            exits.register(pidfd, zmq.POLLIN)
        while self._tasks and time.monotonic() < deadline:
            for fd, _ in exits.poll(100):
                if fd in self._by_pidfd:
                    exits.unregister(fd)
                    self._exited(self._by_pidfd[fd])
        for task in list(self._tasks.values()):
            task.kill()
            self._exited(task)


def poll_ms(due: float) -> int:
    """A poll's timeout that ends just past ``due`` (monotonic seconds), never before it."""
    return max(0, int((due - time.monotonic()) * 1000) + 1)


def run_node(settings: NodeSettings) -> None:
    try:
        daemon = NodeDaemon(settings)
    except (CurveError, ContainmentError) as error:
        log.error("%s", error)
        raise SystemExit(2) from None
    daemon.run()
