"""The master daemon's loop around ``MasterCore``: its sockets, and nothing it decides.

One ROUTER socket takes clients and the nodes' hellos and carries the
master's replies and orders to the nodes; one PUB socket sends the slot switch
at every quantum boundary; one PULL socket takes what the nodes send unasked
(quantum reports, heartbeats, task exits). The loop wakes for clients at once,
and for the nodes' reports at most every twentieth of a quantum (and just
before each switch, so the decision sees every report of the quantum that
ends): the reports that follow a switch cost a few wake-ups, not one each,
and an exit is acted on within a few milliseconds. Every message is
routed by its type through a table (master/routes.py) to the core's part that answers it, once
master/authorization.py has said who sent it and whether they may; a bad frame
or a failing handler gets an error reply or a log line, and the loop lives on.
SIGTERM and SIGINT end it. A turn's events are followed by one scheduling pass
(``MasterCore.scheduling_pass``), whatever they were: no handler runs it.

Group commit: each turn of the loop (a batch of client messages, a drain of
the reports, a quantum boundary) ends with one commit of the store's writes,
and only then do its replies and orders to nodes go out (master/outgoing.py).

No client can hold the switch back: a wake-up handles at most
CLIENT_MESSAGES_PER_WAKE client messages, and none once the switch is due;
the rest wait for the next wake-up, after the switch. Bad frames are counted
and logged at most once a second; a step of the loop that fails (a handler,
the tick, reading the reports) is logged and the loop goes on.
"""

import functools
import logging
import math
import os
import signal
import time
from typing import Any

import zmq

from gangsched.daemon.curve import CurveError, KeyFolder
from gangsched.daemon.endpoints import UnsafeBind, private_ipc
from gangsched.daemon.logs import ThrottledWarning, survive
from gangsched.daemon.realtime import GrowthFreezer, freeze_start_up_objects, raise_priority, zmq_context
from gangsched.daemon.signals import SignalEvents
from gangsched.daemon.sockets import has_message
from gangsched.master.authorization import (
    is_node_report,
    one_message,
    request,
    viewer_refusal,
)
from gangsched.master.clock import Now, read_clock
from gangsched.master.config_file import ConfigError, master_settings, partition_plan
from gangsched.master.core import MasterCore, reconfigure_refusal
from gangsched.master.leadership import Kept
from gangsched.master.node_events import NodeEndpoints
from gangsched.master.outgoing import Outgoing
from gangsched.master.published import BoundEndpoints, publish
from gangsched.master.routes import Handler, node_report_routes, request_routes
from gangsched.master.settings import PARTITION_SETTINGS, MasterSettings
from gangsched.master.standby import Standby
from gangsched.master.store import StoreError
from gangsched.master.store_engines import open_lead, open_store
from gangsched.master.viewer import WebServer, viewer_endpoint
from gangsched.protocol.codec import encode
from gangsched.protocol.errors import ErrorCode, ProtocolError
from gangsched.protocol.frames import MAX_MESSAGE_BYTES, MAX_ROUTER_BYTES
from gangsched.protocol.messages import (
    ErrorReply,
    Message,
    NodeHello,
    Reconfigure,
    Reconfigured,
)

log = logging.getLogger("gangsched.master")

# enough that a burst of ordinary requests is answered in one wake-up; few enough that a
# flood of them costs the switch at most a few milliseconds
CLIENT_MESSAGES_PER_WAKE = 64

_PAGE_BYTES = os.sysconf("SC_PAGE_SIZE")


class MasterDaemon:
    def __init__(self, settings: MasterSettings, flags: dict[str, Any] | None = None) -> None:
        """``flags``: the settings given on the command line, which a reconfiguration keeps over the file's."""
        self._settings = settings
        self._flags = flags or {}
        priority = settings.realtime_priority
        realtime = priority > 0 and raise_priority(priority, log)
        self._context = zmq_context(priority if realtime else None)
        self._authenticator = None
        self._router = self._context.socket(zmq.ROUTER)
        self._pub = self._context.socket(zmq.PUB)
        self._pull = self._context.socket(zmq.PULL)
        if settings.keys is not None:
            keys = KeyFolder(settings.keys)
            self._authenticator = keys.authenticator(self._context)
            keys.serve(self._router)
            keys.serve(self._pub, nodes_only=True)  # the switches are the nodes' alone to hear
            keys.serve(self._pull, nodes_only=True)
            log.info("CURVE on: only the keys in %s may connect", settings.keys / "authorized")
        else:
            for bind in (settings.bind, settings.switch_bind, settings.report_bind):
                private_ipc(bind)
            log.info("no keys: only this account (uid %d) reaches %s", os.geteuid(), settings.bind)
        try:
            self._io_key = None if settings.io_key is None else settings.io_key.read_bytes()
        except OSError as error:
            raise CurveError(f"--io-key {settings.io_key}: {error.strerror}: the I/O server's key cannot be read") \
                from None
        self._bad_frame = ThrottledWarning(log)
        # each node's route as its daemon's last hello came (kept across leads: a core that takes the lead again
        # in this process must be able to ask the nodes it does not know yet for their hello)
        self._node_routes: dict[str, bytes] = {}
        self._router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self._router.setsockopt(zmq.ROUTER_HANDOVER, 1)  # a restarted node takes its name back
        self._router.setsockopt(zmq.MAXMSGSIZE, MAX_ROUTER_BYTES)
        self._router.setsockopt(zmq.LINGER, 0)
        self._router.bind(settings.bind)
        self._pub.setsockopt(zmq.LINGER, 0)
        self._pub.bind(settings.switch_bind)
        self._pull.setsockopt(zmq.LINGER, 0)
        self._pull.setsockopt(zmq.MAXMSGSIZE, 2 * MAX_MESSAGE_BYTES)
        self._pull.bind(settings.report_bind)
        self.endpoint = self._router.getsockopt_string(zmq.LAST_ENDPOINT)
        self.switch_endpoint = self._pub.getsockopt_string(zmq.LAST_ENDPOINT)
        self.report_endpoint = self._pull.getsockopt_string(zmq.LAST_ENDPOINT)
        self._endpoints = NodeEndpoints(self.switch_endpoint, self.report_endpoint)
        publish(settings.state_dir, BoundEndpoints(self.endpoint, self.switch_endpoint, self.report_endpoint))
        self._lead = open_lead(settings, self.endpoint)
        log.info("listening on %s, switches on %s, reports on %s, quantum %d ms",
                 self.endpoint, self.switch_endpoint, self.report_endpoint, settings.quantum_ms)
        self._viewer: zmq.Socket[bytes] | None = None
        self._web: WebServer | None = None
        if settings.http_bind:
            self._viewer = self._context.socket(zmq.ROUTER)
            self._viewer.setsockopt(zmq.LINGER, 0)
            self._viewer.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
            endpoint = viewer_endpoint(settings.state_dir)
            self._viewer.bind(endpoint)
            if settings.web_child:
                self._web = WebServer(settings.http_bind, endpoint, settings.state_dir, settings.quantum_ms,
                                      settings.log_level)

    def _take_office(self) -> None:
        """This master leads: its state read from the store, as after a restart."""
        settings = self._settings
        self._store = store = open_store(settings)
        self._core = core = MasterCore(settings, self._endpoints, store, read_clock(), partition_plan(settings),
                                       self._io_key)
        self._outgoing = Outgoing(self._router, core, store, self._bad_frame, self._lead)
        self._growth = GrowthFreezer(len(core.table.jobs))
        self._node_handlers = node_report_routes(core)
        self._handlers = request_routes(core, self._lead, self._reconfigure, _resident_bytes)

    def run(self) -> None:
        """Stand by until this master leads (at once with SQLite), lead until the lead is lost or handed
        over, stand by again; until SIGTERM or SIGINT."""
        with SignalEvents([signal.SIGTERM, signal.SIGINT]) as signals:
            standby = Standby(self._lead, self.endpoint, self._router, self._pull, self._viewer, self._receive,
                              poll_s=self._settings.lease_s / 10)
            while standby.wait_for_lead(signals):
                self._take_office()
                ended = self._lead_until_lost(signals)
                self._leave_office()
                if ended is None:
                    break
                if ended is Kept.HANDS_OVER:  # once its last writes are in: the next leader reads them
                    self._lead.hand_over()
        self.close()

    def _lead_until_lost(self, signals: SignalEvents) -> Kept | None:
        """The leader's loop, until the lead is lost or to be handed over (None: a signal ended it)."""
        quantum = self._core.matrices.shortest_quantum_ms() / 1000
        # The nodes' reports are read when they arrive, but not twice within a twentieth of a quantum:
        # an exit is acted on at once (its slot is used again in the same quantum: docs/limits.md,
        # "Throughput"), while the reports that follow each switch are read in a few drains, not one
        # wake-up each.
        drain_gap = quantum / 20
        poller = zmq.Poller()
        poller.register(self._router, zmq.POLLIN)
        poller.register(signals.fileno(), zmq.POLLIN)
        if self._viewer is not None:
            poller.register(self._viewer, zmq.POLLIN)
        with_reports = zmq.Poller()
        for socket, _ in poller.sockets:
            with_reports.register(socket, zmq.POLLIN)
        with_reports.register(self._pull, zmq.POLLIN)
        next_switch = self._core.next_boundary()
        next_read = time.monotonic()
        handing_over = False  # root asked for a takeover: the lead goes after the next switch
        freeze_start_up_objects()
        while True:
            now = time.monotonic()
            listening = with_reports if now >= next_read else poller
            woken_by = next_switch if listening is with_reports else min(next_switch, next_read)
            wait_s = min(woken_by, self._lead.due) - now
            ready = dict(listening.poll(math.ceil(max(0.0, wait_s) * 1000)))
            if signals.fileno() in ready and signals.drain():
                log.info("shutting down")
                return None
            if self._router in ready:
                self._receive_some(until=next_switch)
            if self._viewer is not None and self._viewer in ready:
                survive(log, "answering the web view", self._answer_viewer)
            now = time.monotonic()
            # renewed when due, and looked at before every switch: nothing goes out on a lease this master
            # no longer holds by its own clock (it was stopped, or could not renew it)
            if now >= self._lead.due or now >= next_switch:
                kept = self._lead.keep(now)
                if kept is Kept.LOST:
                    return Kept.LOST
                handing_over |= kept is Kept.HANDS_OVER
            if self._pull in ready or now >= next_switch:
                survive(log, "reading the nodes' reports", self._read_nodes)
                next_read = now + drain_gap
            if now >= next_switch:
                survive(log, "the switch", self._switch)
                next_switch = self._core.next_boundary()
                if handing_over:  # after its switch: the next leader's first switch ends this quantum
                    return Kept.HANDS_OVER

    def _leave_office(self) -> None:
        """The lead ends (lost, handed over, or the daemon stops): what the store has not committed is
        lost with it, and the next leader reads the store as it is."""
        survive(log, "the last commit", functools.partial(self._outgoing.end_turn, boundary=True))
        survive(log, "closing the store", self._store.close)

    def close(self) -> None:
        self._lead.close()
        if self._web is not None:
            self._web.stop()
        if self._viewer is not None:
            self._viewer.close()
        self._router.close()
        self._pub.close()
        self._pull.close()
        if self._authenticator is not None:
            self._authenticator.stop()
        self._context.term()

    def _reconfigure(self, message: Reconfigure, now: Now) -> Reconfigured | ErrorReply:
        """Read the configuration file again: one that does not validate is refused, and the running
        configuration stays."""
        refused = reconfigure_refusal(message.admin)
        if refused is not None:
            return refused
        path = self._settings.config
        if path is None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason="the master runs without a configuration file: "
                              "start it with --config FILE")
        try:
            settings = master_settings({**self._flags, "config": path})
            plan = partition_plan(settings)
        except ConfigError as error:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"{error}\nnothing changed")
        later = [name for name in MasterSettings.model_fields if name not in PARTITION_SETTINGS
                 and getattr(settings, name) != getattr(self._settings, name)]
        return self._core.reconfigure(message.admin, str(path), plan, now, later)

    def _switch(self) -> None:
        self._core.tick(read_clock())
        switch = self._core.switch(time.monotonic_ns())
        self._outgoing.send_to_nodes(before_commit=True)  # the columns of a new layout before the switch naming it
        self._pub.send(encode(switch, self._lead.epoch))
        self._outgoing.end_turn(boundary=True)

    def _receive_some(self, until: float) -> None:
        """Client messages waiting, up to CLIENT_MESSAGES_PER_WAKE and not past ``until``."""
        for _ in range(CLIENT_MESSAGES_PER_WAKE):
            if time.monotonic() >= until or not has_message(self._router):
                break
            frames, user = self._receive(self._router)
            survive(log, "handling a client message", functools.partial(self._handle, frames, user))
        survive(log, "the turn's scheduling pass", lambda: self._core.scheduling_pass(read_clock()))
        survive(log, "committing and sending", self._outgoing.end_turn)
        self._growth.turn_ended(len(self._core.table.jobs))

    def _answer_viewer(self) -> None:
        """The web view's questions: read-only ones, through the same handlers as a client's."""
        assert self._viewer is not None
        for _ in range(CLIENT_MESSAGES_PER_WAKE):
            if not has_message(self._viewer):
                return
            sender, *body = self._viewer.recv_multipart()
            try:
                message = one_message(body)
            except ProtocolError as error:
                reply: Message | None = ErrorReply(code=error.code, reason=error.reason)
            else:
                reply = viewer_refusal(message) or self._answer(self._handlers[type(message)], sender, message)
            if reply is not None:
                self._viewer.send_multipart([sender, encode(reply)], zmq.NOBLOCK)

    @staticmethod
    def _answer(handler: Handler, sender: bytes, message: Message, now: Now | None = None) -> Message | None:
        """What ``handler`` answers, given the clocks read now (or ``now``, read for a batch that arrived
        before it); a handler that fails answers INTERNAL (logged with its traceback), so that a sender
        waiting for an answer never waits in vain."""
        try:
            return handler(sender, message, now or read_clock())
        except Exception as error:
            log.exception("handling %s failed", message.type)
            return ErrorReply(code=ErrorCode.INTERNAL, reason=f"{type(error).__name__}: {error}")

    def _receive(self, socket: zmq.Socket[bytes], flags: int = 0) -> tuple[list[bytes], str | None]:
        """The frames of the next message, and the user whose key sent it (None without keys)."""
        if self._authenticator is None:
            return socket.recv_multipart(flags), None
        # the user is the one the key belongs to, not the one the message names
        frames = socket.recv_multipart(flags, copy=False)
        return [frame.bytes for frame in frames], str(frames[-1].get("User-Id"))

    def _read_nodes(self) -> None:
        started = time.perf_counter()
        self._drain_nodes()
        self._core.report_drain_time.observe(time.perf_counter() - started)

    def _drain_nodes(self) -> None:
        now = read_clock()  # what waits on the socket arrived by now: one reading for the whole drain
        while True:
            # a receive that raises once at the end: asking before each message (has_message)
            # costs a system call per report, a thousand per quantum at a thousand nodes
            try:
                frames, user = self._receive(self._pull, zmq.NOBLOCK)
            except zmq.Again:
                break
            try:
                message = one_message(frames)
            except ProtocolError as error:
                self._bad_frame("bad message on the report socket: %s", error)
                continue
            if not is_node_report(message, user):
                self._bad_frame("ignored a %s message on the report socket (key: %s): only nodes report there",
                                message.type, user or "none")
                continue
            reply = self._answer(self._node_handlers[type(message)], b"", message, now)
            route = self._node_routes.get(message.node)
            if reply is not None and route is not None:  # else it cannot be told: its next connection brings a hello
                self._outgoing.reply([route], reply)
        try:  # one scheduling pass for every end the drain brought: in a flood of small jobs, one a job before
            self._core.scheduling_pass(now)
        finally:
            self._outgoing.end_turn()

    def _handle(self, frames: list[bytes], user: str | None = None) -> None:
        envelope, message, refusal = request(frames, user)
        if message is None:
            assert refusal is not None
            if refusal.code is ErrorCode.PERMISSION_DENIED:  # a key that spoke for a node: an impostor
                self._bad_frame("refused a message from %r (key: %s): %s", envelope[0], user, refusal.reason)
            else:
                self._bad_frame("bad message from %r: %s", envelope[0], refusal.reason)
            self._outgoing.reply(envelope, refusal)
            return
        if isinstance(message, NodeHello):  # a node's key said it: where that daemon is, for this process's life
            self._node_routes[message.node] = envelope[0]
        handler = self._handlers.get(type(message))
        if handler is None:
            reason = f"the master does not take {message.type!r} messages"
            self._outgoing.reply(envelope, ErrorReply(code=ErrorCode.UNEXPECTED, reason=reason))
            return
        reply = self._answer(handler, envelope[0], message)
        if reply is not None:
            self._outgoing.reply(envelope, reply)


def _resident_bytes() -> int:
    """This process's resident memory now (not its peak, which getrusage gives)."""
    with open("/proc/self/statm", "rb") as statm:
        return int(statm.read().split()[1]) * _PAGE_BYTES


def run_master(settings: MasterSettings, flags: dict[str, Any] | None = None) -> None:
    """``flags``: the settings given on the command line (a reconfiguration keeps them over the file's)."""
    try:
        daemon = MasterDaemon(settings, flags)
    except (StoreError, CurveError, UnsafeBind, ConfigError) as error:
        log.error("%s", error)
        raise SystemExit(2) from None
    try:
        daemon.run()
    except (StoreError, ConfigError) as error:  # the store, or the file's partitions, cannot be read as it leads
        log.error("%s", error)
        raise SystemExit(2) from None
