"""Nodes taken out of service and put back (docs/operations.md, "Nodes"): Slurm's ``scontrol update
nodename=... state=drain|resume|down``, as ``gang admin node``.

A drained node takes no new job in any row of any matrix: each matrix keeps it
as a column, closed (policy/topology.py), so its jobs run on in their rows to
their end; it shows ``draining`` while they do and ``drained`` after. A node
taken down leaves every matrix at once: its jobs end ``NODE_FAIL`` (or are
requeued) as on a lost node, and its tasks are killed; its daemon stays
registered and gets nothing. A resumed node is back in service. The marks
are stored, so a master restart and a node daemon starting again keep them.
A node lost without word (its heartbeats missed) comes back into service when
its daemon registers again (Slurm's ``ReturnToService=1``), or, with
``--return-to-service 0``, is marked down "Not responding" until resumed.
"""

import logging

from gangsched.master.clock import Now
from gangsched.master.matrices import Matrices
from gangsched.master.node_events import NodeEvents
from gangsched.master.nodes import NodeMark, NodeRegistry
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.master.task_reconciliation import TaskReconciliation
from gangsched.protocol.admin_messages import NodeAction, NodesUpdated, NodeUpdate
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.hostlists import expand_hostlist
from gangsched.protocol.messages import ErrorReply
from gangsched.protocol.records import NodeReason, NodeState

log = logging.getLogger("gangsched.master")

NOT_RESPONDING = "Not responding"  # Slurm's reason for a node lost without word
MASTER_USER = "gangsched"  # who marks a node the master itself took out


class NodeService:
    def __init__(self, nodes: NodeRegistry, matrices: Matrices, node_events: NodeEvents, tasks: TaskReconciliation,
                 store: JobStore) -> None:
        self._nodes = nodes
        self._matrices = matrices
        self._node_events = node_events
        self._tasks = tasks
        self._store = store

    def update(self, message: NodeUpdate, now: Now) -> NodesUpdated | ErrorReply:
        """Drain, resume or take down every node of the hostlist, or, if any may not be, none."""
        names_or_refusal = self._refusal(message)
        if isinstance(names_or_refusal, ErrorReply):
            return names_or_refusal
        names = names_or_refusal
        action = message.action
        marks: dict[str, NodeMark | None] = {}
        for name in names:
            if action is NodeAction.RESUME:
                marks[name] = None
            else:
                state = NodeState.DRAINING if action is NodeAction.DRAIN else NodeState.DOWN
                marks[name] = NodeMark(state, NodeReason(text=message.reason or "", user=message.admin,
                                                         time=now.wall))
        try:
            self._store.save_node_marks(marks)
        except StoreWriteError as error:
            return ErrorReply.nothing_changed(ErrorCode.INTERNAL, f"the job store cannot write ({error})")
        self._apply(marks, now)
        log.info("nodes %s: %s by %s%s", ",".join(names), action, message.admin,
                 f" ({message.reason})" if message.reason else "")
        return NodesUpdated(nodes=names, action=action)

    def _refusal(self, message: NodeUpdate) -> list[str] | ErrorReply:
        """The nodes named, or why the update is refused."""
        if message.admin != "root":
            return ErrorReply.nothing_changed(ErrorCode.PERMISSION_DENIED,
                                              f"only root changes the state of nodes, not {message.admin}")
        try:
            names = expand_hostlist(message.nodes)
        except ValueError as error:
            return ErrorReply.nothing_changed(ErrorCode.INVALID_SPEC, str(error))
        known = set(self._nodes.names()) | set(self._nodes.marks) | self._matrices.named_nodes()
        unknown = [name for name in names if name not in known]
        if unknown:
            return ErrorReply.nothing_changed(ErrorCode.INVALID_SPEC, f"no node {unknown[0]}: the master knows "
                                              f"{len(known)} nodes (gang nodes lists them)")
        if message.action is NodeAction.RESUME:
            in_service = [name for name in names if name not in self._nodes.marks]
            if in_service:
                return ErrorReply.nothing_changed(ErrorCode.INVALID_SPEC, f"node {in_service[0]} is not drained or "
                                                  "down: nothing to resume")
        elif not message.reason:
            return ErrorReply.nothing_changed(ErrorCode.INVALID_SPEC,
                                              f"{message.action} needs a reason (--reason TEXT)")
        return names

    def _apply(self, marks: dict[str, NodeMark | None], now: Now) -> None:
        """The marks, written, take effect: the matrices follow the nodes in service and those closed."""
        for name, mark in marks.items():
            self._nodes.mark(name, mark)
        for name, mark in marks.items():
            if mark is not None and mark.state is NodeState.DOWN:
                self._node_events.take_out(name, f"node {name} was taken down: {mark.reason.text}", now)
        self._tasks.follow_nodes(now)

    def not_responding(self, name: str, now: Now) -> None:
        """A node lost without word, where nodes do not return to service by themselves: marked down until
        an administrator resumes it."""
        mark = NodeMark(NodeState.DOWN, NodeReason(text=NOT_RESPONDING, user=MASTER_USER, time=now.wall))
        try:
            self._store.save_node_marks({name: mark})
        except StoreWriteError as error:
            log.error("the job store cannot write node %s's mark (%s): it returns to service when back", name, error)
            return
        self._nodes.mark(name, mark)
