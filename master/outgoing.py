"""What leaves the master after a turn of its loop, and when: only once the turn's writes are committed
(group commit, docs/architecture.md).

A reply to a client or a node, and an order to a node, may tell of a change a
crash could undo (a job id, a launch, an exit acknowledged) until the store
has committed it. So each turn of the loop ends with ``end_turn``: one commit,
then everything the turn produced, in order. While the store cannot commit,
it is held, in order, and the commit is tried again at each quantum boundary.
What is safe before its commit goes out meanwhile:

* the node columns: they tell no change, and the switch that names their rows
  must find them there, so the nodes keep time-sharing;
* the kills (a cancel, a time limit, a job that failed): a kill can only end
  the tasks of a job whose end is decided in memory. If the master dies before
  the commit, the store still holds the job as running; the restarted master
  finds its tasks gone (the nodes' exits, or hellos without them) and ends it,
  failed instead of cancelled or timed out, but ended either way: nothing runs
  that the store does not know of, and no processor is counted twice. Held,
  a job that fills the store's own file system could be neither cancelled nor
  timed out, and its frozen task kept what it wrote open;
* the answer to a cancel that killed a running job (``Cancelled.killed``), for
  the same reason: the job ends whatever the store keeps. A pending job's
  cancel waits for its commit: a crash would undo it, and the job would run.
"""

import logging
import time
from collections import deque

import zmq

from gangsched.daemon.logs import ThrottledWarning
from gangsched.master.clock import read_clock
from gangsched.master.core import MasterCore
from gangsched.master.leadership import Lead
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.protocol.codec import encode
from gangsched.protocol.messages import Cancelled, KillTask, LaunchTask, Message, NodeColumn

log = logging.getLogger("gangsched.master")


class Outgoing:
    def __init__(self, router: zmq.Socket[bytes], core: MasterCore, store: JobStore,
                 bad_frame: ThrottledWarning, lead: Lead) -> None:
        """``lead``: its epoch is stamped on every message to the nodes, and none goes out while it is not held."""
        self._router, self._core, self._store, self._bad_frame, self._lead = router, core, store, bad_frame, lead
        self._failing = False  # the last commit failed: what depends on the writes is held
        self._replies: deque[tuple[list[bytes], Message]] = deque()  # to clients and nodes, after the commit

    def reply(self, envelope: list[bytes], reply: Message) -> None:
        """Sent at the end of the turn, once its writes are committed."""
        self._replies.append((envelope, reply))

    def end_turn(self, boundary: bool = False) -> None:
        """Commit the turn's writes, then send what waited for them; hold it while the store cannot commit
        (tried again at each quantum ``boundary``)."""
        store = self._store
        if store.pending and (boundary or not self._failing):
            try:
                store.commit()
            except StoreWriteError as error:
                if not self._failing:
                    log.error("the job store cannot commit (%s): replies and orders to nodes are held until it "
                              "can, tried again every quantum", error)
                self._failing = True
            else:
                if self._failing:
                    log.info("the job store commits again: what was held goes out")
                self._failing = False
        if store.pending:
            self.send_to_nodes(before_commit=True)
            waiting: deque[tuple[list[bytes], Message]] = deque()
            while self._replies:
                envelope, reply = self._replies.popleft()
                if isinstance(reply, Cancelled) and reply.killed:
                    self._send_reply(envelope, reply)
                else:
                    waiting.append((envelope, reply))
            self._replies = waiting
            return
        while self._replies:
            self._send_reply(*self._replies.popleft())
        self.send_to_nodes()

    def send_to_nodes(self, before_commit: bool = False) -> None:
        """The core's orders to nodes, in order; ``before_commit``: only those safe to send before the
        turn's writes are committed, node columns and kills (the rest keep their order)."""
        outbox = self._core.outbox
        if not self._lead.holds(time.monotonic()):
            return  # held: this master is about to find it no longer leads
        held: deque[tuple[str, Message]] = deque()
        launches_held: set[int] = set()  # a kill never overtakes its job's launch: it would find no task
        while outbox:
            name, message = outbox.popleft()
            if before_commit and not isinstance(message, NodeColumn) and \
                    (not isinstance(message, KillTask) or message.job_id in launches_held):
                if isinstance(message, LaunchTask):
                    launches_held.add(message.task.job_id)
                held.append((name, message))
                continue
            node = self._core.node_events.node(name)
            try:
                if node is None:
                    raise zmq.ZMQError(zmq.EHOSTUNREACH)
                self._router.send_multipart([node.identity, encode(message, self._lead.epoch)], zmq.NOBLOCK)
            except zmq.ZMQError as error:
                if error.errno == zmq.EHOSTUNREACH:  # its daemon left the socket: it may come back
                    log.warning("cannot send %s to node %s: %s; kept for its next hello", message.type, name,
                                error.strerror)
                    self._core.node_events.undelivered(name, message)
                else:  # its queue is full: it does not keep up
                    log.warning("cannot send %s to node %s: %s", message.type, name, error.strerror)
                    self._core.node_events.node_unreachable(name, read_clock())
        outbox.extend(held)

    def _send_reply(self, envelope: list[bytes], reply: Message) -> None:
        try:
            self._router.send_multipart([*envelope, encode(reply, self._lead.epoch)], zmq.NOBLOCK)
        except zmq.ZMQError as error:  # the client left, or its queue is full
            self._bad_frame("could not answer %r: %s", envelope[0], error.strerror)
