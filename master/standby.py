"""What a master does while another leads (docs/architecture.md, "Leadership"): it answers every
request with where the leader is (``NotLeader``), but ``gang admin masters`` and ``gang admin
takeover``, which it answers itself; it reads and drops what nodes still send it; and it tries to
take the lead every tenth of a lease, at once when a takeover names it. It holds no job state:
the master that takes the lead reads it from the store, as after a restart.
"""

import logging
import time
from collections.abc import Callable

import zmq

from gangsched.daemon.signals import SignalEvents
from gangsched.daemon.sockets import has_message
from gangsched.master.authorization import request, viewer_refusal
from gangsched.master.leadership import Lead, LeadError
from gangsched.protocol.codec import encode
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import (
    ErrorReply,
    MastersList,
    MastersQuery,
    Message,
    NotLeader,
    Takeover,
    TakeoverRequested,
)

log = logging.getLogger("gangsched.master")

Receive = Callable[[zmq.Socket[bytes], int], tuple[list[bytes], str | None]]


def leadership_answer(lead: Lead, message: MastersQuery | Takeover) -> Message:
    """The answer of any master, leader or standby, to a question about the lead."""
    try:
        if isinstance(message, MastersQuery):
            return MastersList(masters=lead.masters())
        if message.admin != "root":
            return ErrorReply(code=ErrorCode.PERMISSION_DENIED, reason=f"only root moves the lead, not {message.admin}")
        to, leader, epoch = lead.request_takeover(message.to)
    except LeadError as error:
        return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=str(error))
    log.info("%s asked that the lead move to %s", message.admin, to)
    return TakeoverRequested(to=to, leader=leader, epoch=epoch)


class Standby:
    def __init__(self, lead: Lead, endpoint: str, router: zmq.Socket[bytes], pull: zmq.Socket[bytes],
                 viewer: zmq.Socket[bytes] | None, receive: Receive, poll_s: float) -> None:
        self._lead, self._endpoint = lead, endpoint
        self._router, self._pull, self._viewer, self._receive = router, pull, viewer, receive
        self._poll_s = poll_s

    def wait_for_lead(self, signals: SignalEvents) -> bool:
        """Stand by until this master leads (True), or a signal ends it (False)."""
        poller = zmq.Poller()
        for socket in (self._router, self._pull, self._viewer):
            if socket is not None:
                poller.register(socket, zmq.POLLIN)
        poller.register(signals.fileno(), zmq.POLLIN)
        next_try = time.monotonic()
        while True:
            now = time.monotonic()
            if now >= next_try:
                if self._lead.take(now):
                    return True
                next_try = now + self._poll_s
            ready = dict(poller.poll(max(0, int((next_try - time.monotonic()) * 1000)) + 1))
            if signals.fileno() in ready and signals.drain():
                return False
            if self._router in ready and self._answer_all(self._router, self._receive):
                next_try = time.monotonic()  # a takeover named this master: it tries at once
            if self._viewer is not None and self._viewer in ready:  # the web view's: no keys, no user, only reads
                self._answer_all(self._viewer, lambda socket, flags: (socket.recv_multipart(flags), None), True)
            while has_message(self._pull):  # a node's reports, for the leader it took this master for
                self._pull.recv(zmq.NOBLOCK)

    def _answer_all(self, socket: zmq.Socket[bytes], receive: Receive, read_only: bool = False) -> bool:
        """Answer what waits on ``socket``, read with ``receive`` (``read_only``: the web view's, which may only
        ask); whether a takeover named this master. A failure is logged, and the master stands by on."""
        try:
            return self._answer_waiting(socket, receive, read_only)
        except Exception:
            log.exception("answering as a standby failed; the master stands by on")
            return False

    def _answer_waiting(self, socket: zmq.Socket[bytes], receive: Receive, read_only: bool) -> bool:
        named = False
        while has_message(socket):
            envelope, message, refusal = request(*receive(socket, zmq.NOBLOCK))
            if read_only and message is not None:
                refusal = viewer_refusal(message)
                message = None if refusal is not None else message
            reply: Message
            if isinstance(message, (MastersQuery, Takeover)):
                reply = leadership_answer(self._lead, message)
                named |= isinstance(reply, TakeoverRequested) and reply.to == self._endpoint
            elif refusal is not None:
                reply = refusal
            else:
                reply = NotLeader(master=self._endpoint, leader=self._lead.leader())
            try:
                socket.send_multipart([*envelope, encode(reply)], zmq.NOBLOCK)
            except zmq.ZMQError as error:  # the asker is gone
                log.debug("cannot answer %s: %s", envelope[0], error.strerror)
        return named
