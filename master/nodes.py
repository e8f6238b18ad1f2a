"""The nodes the master knows: who is up, how to reach them, when they were last heard, and which an
administrator took out of service (drained: no new job; down: none at all), which its matrices follow."""

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import NamedTuple

from gangsched.policy.live_scheduler import NodeShape
from gangsched.protocol.messages import NodeHello
from gangsched.protocol.records import MpiKind, NodeInfo, NodeReason, NodeState, PeerEndpoint


class NodeMark(NamedTuple):
    """A node an administrator took out of service: draining (``NodeState.DRAINING``) or down."""

    state: NodeState
    reason: NodeReason


@dataclass
class Node:
    name: str
    identity: bytes  # ROUTER routing id of the node's DEALER
    cpu_share: float  # of one CPU's time, the whole node's
    processors: int
    peer: PeerEndpoint | None  # None while it is only expected back after a master restart
    state: NodeState
    last_seen: float  # monotonic seconds
    incarnation: str = ""  # of the daemon that said hello: another one has none of its tasks
    util_pct: float | None = None  # its tasks' CPU over the last quantum reported, of its CPU share
    via: str | None = None  # the relay its messages come through; None: straight to the master
    mpi: tuple[MpiKind, ...] = ()  # the process-manager interfaces it serves
    memory: int = 0  # bytes its jobs may commit
    stale_refused: int = 0  # messages of an older leader's epoch it refused, as its last heartbeat said
    welcomes: int = 0  # this master's welcomes to its daemon (this incarnation): NodeHello.welcomed
    reported: float = -math.inf  # monotonic seconds: its last report or heartbeat since it registered

    def used(self, pct: float) -> None:
        """Its tasks' CPU over the last quantum it reported, of its CPU share."""
        self.util_pct = pct

    def refused_stale(self, count: int) -> None:
        """Its daemon says it refused ``count`` messages of an older leader's epoch."""
        self.stale_refused = count

    @property
    def expected_back(self) -> bool:
        """It ran tasks before the master restarted, and has not said hello to this master yet."""
        return self.peer is None


class NodeRegistry:
    def __init__(self, marks: dict[str, NodeMark] | None = None) -> None:
        self._nodes: dict[str, Node] = {}
        self.marks: dict[str, NodeMark] = marks or {}  # by node name, known to the master or not

    def register(self, hello: NodeHello, identity: bytes, now: float, via: str | None) -> Node:
        node = Node(hello.node, identity, hello.cpu_share, hello.processors, hello.peer, NodeState.UP, now,
                    hello.incarnation, via=via, mpi=tuple(hello.mpi), memory=hello.memory)
        previous = self._nodes.get(hello.node)
        if previous is not None and previous.incarnation == hello.incarnation:
            node.welcomes = previous.welcomes
        node.welcomes += 1  # the caller answers with a welcome
        self._nodes[hello.node] = node
        return node

    def mark(self, name: str, mark: NodeMark | None) -> None:
        """An administrator's mark on a node (drained, down), as written; None: back in service."""
        if mark is None:
            self.marks.pop(name, None)
        else:
            self.marks[name] = mark

    def expect(self, name: str, now: float) -> None:
        """A node that ran tasks before the master restarted: up until it fails to say hello in time."""
        if name not in self._nodes:
            self._nodes[name] = Node(name, b"", 1.0, 1, None, NodeState.UP, now)

    def get(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def seen(self, name: str, now: float) -> bool:
        """Note that an up node spoke; False if it must say hello (again) first."""
        node = self._nodes.get(name)
        if node is None or node.expected_back or node.state is not NodeState.UP:
            return False
        node.last_seen = node.reported = now
        return True

    def stale(self, hello: NodeHello, now: float, within: float) -> bool:
        """The hello left its daemon before a welcome this master sent it had arrived: it repeats an earlier
        hello, already answered, and the daemon has reported since, within the last ``within`` seconds.

        A hello sent once every welcome had arrived had at least as many as this master sent, whatever
        other masters sent. A welcome that never arrived (its daemon left the socket) leaves the daemon
        unregistered: it sends no report, so its next hellos are not stale, and no report late from
        before a hello makes them so for longer than ``within``."""
        node = self._nodes.get(hello.node)
        return node is not None and node.incarnation == hello.incarnation and hello.welcomed < node.welcomes \
            and now - node.reported <= within

    def overdue(self, now: float, timeout: float, rejoin: float) -> tuple[list[str], list[str]]:
        """Up nodes that said hello and then nothing for longer than ``timeout`` seconds, and nodes
        expected after a restart that have not said hello within ``rejoin`` seconds.

        A node behind a relay has twice ``timeout``: if the relay died, the node first needs to
        notice (no switch comes) and register again straight with the master.
        One pass over the nodes for both: the master asks each quantum.
        """
        silent, not_back = [], []
        for name, node in self._nodes.items():
            if node.state is not NodeState.UP:
                continue
            quiet_s = now - node.last_seen
            if node.expected_back:
                if quiet_s > rejoin:
                    not_back.append(name)
            elif quiet_s > (timeout if node.via is None else 2 * timeout):
                silent.append(name)
        return sorted(silent), sorted(not_back)

    def mark_down(self, name: str) -> bool:
        """Mark an up node down; False if it was not up."""
        node = self._nodes.get(name)
        if node is None or node.state is not NodeState.UP:
            return False
        node.state = NodeState.DOWN
        return True

    def up(self) -> dict[str, NodeShape]:
        """Nodes that said hello and are alive, in service (drained ones too: their jobs run on), with their
        processors and memory."""
        marks = self.marks
        return {
            name: NodeShape(node.processors, node.memory)
            for name, node in sorted(self._nodes.items())
            if node.state is NodeState.UP and not node.expected_back
            and (name not in marks or marks[name].state is not NodeState.DOWN)
        }

    def closed(self) -> frozenset[str]:
        """The nodes drained: no new job goes there."""
        return frozenset(name for name, mark in self.marks.items() if mark.state is NodeState.DRAINING)

    def count_up(self) -> int:
        """How many nodes are up and said hello: those that apply the switches and report them."""
        return sum(1 for node in self._nodes.values() if node.state is NodeState.UP and not node.expected_back)

    def processors(self, within: Callable[[str], bool]) -> list[int]:
        """Every known node's processors ``within`` says, up or not, in name order."""
        return [node.processors for name, node in sorted(self._nodes.items()) if within(name)]

    def memories(self, within: Callable[[str], bool]) -> list[int]:
        """Those nodes' memory, in the same order (a node expected after a restart: as it said before, or 0)."""
        return [node.memory for name, node in sorted(self._nodes.items()) if within(name)]

    def names(self) -> list[str]:
        return sorted(self._nodes)

    def serving(self, kind: MpiKind) -> list[str]:
        """The nodes that said hello and serve the process-manager interface ``kind``."""
        return [name for name, node in sorted(self._nodes.items()) if not node.expected_back and kind in node.mpi]

    def count(self) -> int:
        return len(self._nodes)

    def info(self, jobs_by_node: dict[str, list[int]], used: dict[str, int], committed: dict[str, int],
             partitions: Callable[[str], list[str]], now: float) -> list[NodeInfo]:
        return [
            NodeInfo(
                name=node.name,
                state=self._shown_state(node, bool(jobs_by_node.get(node.name))),
                reason=self.marks[node.name].reason if node.name in self.marks else None,
                partitions=partitions(node.name),
                cpu_share=node.cpu_share,
                processors=node.processors,
                processors_used=used.get(node.name, 0),
                jobs=jobs_by_node.get(node.name, []),
                seen_ago_s=now - node.last_seen,
                util_pct=node.util_pct,
                via=node.via,
                mpi=list(node.mpi),
                memory=node.memory,
                memory_committed=committed.get(node.name, 0),
                stale_refused=node.stale_refused,
            )
            for node in sorted(self._nodes.values(), key=lambda node: node.name)
        ]

    def _shown_state(self, node: Node, has_jobs: bool) -> NodeState:
        mark = self.marks.get(node.name)
        if node.state is NodeState.DOWN or mark is None:
            return node.state
        if mark.state is NodeState.DRAINING and not has_jobs:
            return NodeState.DRAINED
        return mark.state
