"""The master's side of the node protocol: the daemons registering, and the nodes lost."""

import logging
from collections import deque
from typing import NamedTuple

from gangsched.master.broadcast import Broadcast
from gangsched.master.clock import Now
from gangsched.master.matrices import Matrices
from gangsched.master.nodes import Node, NodeRegistry
from gangsched.master.relays import RelayTree
from gangsched.master.settings import MasterSettings
from gangsched.master.task_exits import TaskExits
from gangsched.master.task_reconciliation import TaskReconciliation
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import (
    ErrorReply,
    KillTask,
    LaunchTask,
    Message,
    NodeColumn,
    NodeHello,
    NodeWelcome,
)
from gangsched.protocol.records import NodeState
from gangsched.protocol.sizes import readable

log = logging.getLogger("gangsched.master")


class NodeEndpoints(NamedTuple):
    """Where the nodes connect for the switches and the reports, as the master bound them."""

    switch: str
    report: str


class NodeEvents:
    """The node daemons as they come and go: their hellos (registration, the exits and tasks each brings), the
    messages one missed, the nodes lost or taken out (what each node says on the report socket:
    master/node_reports.py, master/task_exits.py, master/pmi_relay.py)."""

    def __init__(self, settings: MasterSettings, endpoints: NodeEndpoints, nodes: NodeRegistry, matrices: Matrices,
                 broadcast: Broadcast, exits: TaskExits, tasks: TaskReconciliation,
                 outbox: deque[tuple[str, Message]]) -> None:
        self._settings = settings
        self._endpoints = endpoints
        self._nodes = nodes
        self._relays = RelayTree(settings.relay_fanout)  # which node each node reaches the master through
        self._undelivered: dict[str, list[Message]] = {}  # by node: what its daemon had left the socket before
        self._matrices = matrices
        self._broadcast = broadcast
        self._exits = exits
        self._tasks = tasks
        self._outbox = outbox

    def hello(self, identity: bytes, hello: NodeHello, now: Now) -> NodeWelcome | ErrorReply | None:
        # a stale hello comes while the daemon reports: each quantum, or each heartbeat when idle
        if self._nodes.stale(hello, now.monotonic, 2 * self._settings.heartbeat_ms / 1000):
            self._stale_hello(hello, now)
            return None
        if hello.memory > hello.host_memory:
            reason = f"node {hello.node} declares {readable(hello.memory)} of memory, its host has " \
                f"{readable(hello.host_memory)}: give gang noded --memory at most that"
            log.error("refused %s", reason)
            return ErrorReply(code=ErrorCode.NODE_REFUSED, reason=reason)
        previous = self._nodes.get(hello.node)
        if previous is not None and not previous.expected_back:
            log.info("node %s registers again (pid %d)", hello.node, hello.pid)
        else:
            log.info("node %s registers: %.2f of a CPU's time, pid %d", hello.node, hello.cpu_share, hello.pid)
        home = self._relays.home(hello.node, hello.relay, hello.left_relay)
        if hello.left_relay is not None:
            log.warning("node %s heard no switch through relay %s: homed anew", hello.node, hello.left_relay)
        held = self._undelivered.pop(hello.node, [])
        self._nodes.register(hello, identity, now.monotonic, home.via)
        if previous is not None and previous.incarnation == hello.incarnation:
            self._outbox.extend((hello.node, message) for message in held)  # before anything this hello brings
        self._take_exits(hello, now)
        self._tasks.reconcile(hello, now)
        self._tasks.follow_nodes(now)
        self._outbox.append((hello.node, self._broadcast.hello_column(hello.node)))
        relay = home.endpoints
        return NodeWelcome(
            node=hello.node,
            switch_endpoint=self._endpoints.switch if relay is None else relay.switch,
            report_endpoint=self._endpoints.report if relay is None else relay.report,
            heartbeat_ms=self._settings.heartbeat_ms,
            quantum_ms=self._matrices.shortest_quantum_ms(),  # a switch comes at least this often
            via=home.via,
            relays=home.relays,
        )

    def _stale_hello(self, hello: NodeHello, now: Now) -> None:
        """A hello that left its daemon before this master's welcome to an earlier one arrived (it repeats
        its hello until welcomed): its tasks are old news (a task launched after the welcome, and maybe
        reported running since, would seem to have vanished), and the daemon has its welcome; its exits
        are facts, taken and acknowledged as ever."""
        log.info("node %s: a hello sent before its welcome arrived: only its exits taken", hello.node)
        self._take_exits(hello, now)

    def _take_exits(self, hello: NodeHello, now: Now) -> None:
        """The ends a hello brings, each acknowledged once the store has it; the decisions they bring left to
        the turn's scheduling pass."""
        for exit_ in hello.exits:
            ack = self._exits.ended(exit_, now)
            if ack is not None:
                self._outbox.append((hello.node, ack))

    def node(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def node_unreachable(self, name: str, now: Now) -> None:
        self.lose_node(name, f"node {name} became unreachable", now)

    def undelivered(self, name: str, message: Message) -> None:
        """``message`` could not reach node ``name``: its daemon left this master's socket. It is not lost
        for that: with several masters, a daemon whose hello went unanswered long enough says hello to the
        next, and a master that took the lead answers hellos only once it has read the store, so its
        answer may find the daemon gone for a moment. The message waits for the same daemon's next hello
        (not a node column, nor a launch: each hello brings the current column, and the launches still on
        their way, ``TaskReconciliation.reconcile``); a daemon that does not come back falls silent, and its node is
        lost as any silent node is (``MasterCore.tick``). One that still reports here, its socket to
        this master back without its knowing, is asked for that hello (``hello_if_owed``)."""
        node = self._nodes.get(name)
        if node is not None and node.state is NodeState.UP:
            held = self._undelivered.setdefault(name, [])
            if not isinstance(message, NodeColumn | LaunchTask):
                held.append(message)

    def hello_if_owed(self, name: str) -> ErrorReply | None:
        """A node whose daemon missed a message of this master, and reports: it is asked to say hello again,
        which brings what it missed."""
        return self.say_hello(name) if name in self._undelivered else None

    @staticmethod
    def say_hello(node: str) -> ErrorReply:
        """The answer to a node the master does not know (yet, or any more): it is to register."""
        return ErrorReply(code=ErrorCode.UNKNOWN_NODE, reason=f"node {node} must register first")

    def lose_node(self, name: str, reason: str, now: Now) -> None:
        if not self._nodes.mark_down(name):
            return
        self._undelivered.pop(name, None)
        self._relays.lost(name)
        log.warning("%s: marked down", reason)
        self._tasks.end_jobs_on(name, reason, now)
        self._tasks.follow_nodes(now)

    def take_out(self, name: str, reason: str, now: Now) -> None:
        """An administrator took a node out of service (its mark says so): its jobs end as on a lost node,
        their tasks there killed (its daemon lives on, and stays registered)."""
        for job in self._tasks.end_jobs_on(name, reason, now):
            self._outbox.append((name, KillTask(job_id=job.job_id, reason=reason)))
