"""What leaves the master after a turn of its loop, and when: only once the turn's writes are committed
(group commit, docs/architecture.md).

A reply to a client or a node, and an order to a node, may tell of a change a
crash could undo (a job id, a launch, an exit acknowledged) until the store
has committed it. So each turn of the loop ends with ``end_turn``: one commit,
then everything the turn produced, in order. While the store cannot commit,
it is held, in order, and the commit is tried again at each quantum boundary;
only the node columns go out meanwhile (they tell no change, and the switch
that names their rows must find them there), so the nodes keep time-sharing.
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
from gangsched.protocol.messages import Message, NodeColumn

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
            self.send_to_nodes(only_columns=True)
            return
        while self._replies:
            self._send_reply(*self._replies.popleft())
        self.send_to_nodes()

    def send_to_nodes(self, only_columns: bool = False) -> None:
        """The core's orders to nodes, in order; ``only_columns``: only the node columns, which tell no
        change a crash could undo (the rest keep their order)."""
        outbox = self._core.outbox
        if not self._lead.holds(time.monotonic()):
            return  # held: this master is about to find it no longer leads
        held: deque[tuple[str, Message]] = deque()
        while outbox:
            name, message = outbox.popleft()
            if only_columns and not isinstance(message, NodeColumn):
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
