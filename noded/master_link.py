"""A node daemon's sockets to the master: the DEALER for its hello, the master's orders and
answers and PMI fences; the SUB for switches; the PUSH for reports, heartbeats and exits,
kept in order on one socket so no exit overtakes its task's last report. Where the master
homes the node at a relay (another node, noded/relay.py), the SUB and PUSH connect there;
a node the master makes a relay forwards switches and the other nodes' messages.
"""

import logging
import secrets
from collections.abc import Iterator

import zmq

from gangsched.daemon.curve import NODE_USER, KeyFolder
from gangsched.daemon.endpoints import connectable
from gangsched.daemon.sockets import has_message
from gangsched.noded.core import Route
from gangsched.noded.relay import NodeRelay
from gangsched.noded.settings import NodeSettings
from gangsched.protocol.codec import decode, encode
from gangsched.protocol.errors import ProtocolError
from gangsched.protocol.frames import MAX_MESSAGE_BYTES
from gangsched.protocol.messages import Message, NodeWelcome, SlotSwitch
from gangsched.protocol.records import RelayEndpoints

log = logging.getLogger("gangsched.noded")

# A connection attempt to a host that is gone (a master container restarting, a
# host rebooting) gets no refusal: it waits out SYN retries of 1 s, then 3 s. Far
# above a cluster network's round trip, this makes the node try again at once.
_CONNECT_TIMEOUT_MS = 250
_LAST_EXITS_LINGER_MS = 1000


class MasterLink:
    def __init__(self, settings: NodeSettings, context: zmq.Context[zmq.Socket[bytes]],
                 poller: zmq.Poller) -> None:
        self._master = settings.masters()[0]  # the one it talks to: noded/masters.py picks another
        self._context = context
        self._keys = KeyFolder(settings.keys) if settings.keys is not None else None
        self.dealer = self._socket(zmq.DEALER)
        # The master's route to this daemon: the master learns it from the hello, which only the nodes' key
        # may send, and sends this node's orders to it alone. A route named after the node was a user's to
        # take: a client of the master's ROUTER that named itself so received the node's launches
        # (handover, which a restarted daemon needs, lets a new connection take a routing id).
        self.dealer.setsockopt(zmq.ROUTING_ID, f"{settings.name}.{secrets.token_hex(16)}".encode())
        # each (re)connection: the master may have restarted, or missed what it sent meanwhile (a hello then)
        self.connections = self.dealer.get_monitor_socket(zmq.EVENT_HANDSHAKE_SUCCEEDED)
        self.dealer.connect(self._master)
        # the master's welcome says where to connect these two
        self.sub = self._socket(zmq.SUB)
        self.sub.setsockopt(zmq.CONFLATE, 1)  # a late node jumps to the newest decision
        self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self._push = self._socket(zmq.PUSH)
        self._endpoints: dict[zmq.Socket[bytes], str] = {}
        self._relay = NodeRelay.open(context, settings.spool(), self._keys,
                                     settings.peer_host if settings.peer_transport == "tcp" else None) \
            if settings.relay else None
        # where the nodes homed here send to; None: it offers no relay
        self.relay_pull: zmq.Socket[bytes] | None = None if self._relay is None else self._relay.pull
        self._poller = poller
        for socket in self.sockets:
            poller.register(socket, zmq.POLLIN)
        self._unreachable = False

    @property
    def sockets(self) -> tuple[zmq.Socket[bytes], ...]:
        """The sockets to poll: the master's messages, switches, new connections to the master, and nodes'
        messages to relay."""
        if self._relay is None:
            return self.dealer, self.sub, self.connections
        return self.dealer, self.sub, self.connections, self._relay.pull

    def connected(self) -> bool:
        """Whether the DEALER completed a connection to the master since the last call."""
        found = False
        while has_message(self.connections):
            self.connections.recv_multipart()
            found = True
        return found

    @property
    def relay_endpoints(self) -> RelayEndpoints | None:
        """Where other nodes may be homed at this one; None: it offers no relay."""
        return None if self._relay is None else self._relay.endpoints

    def messages(self) -> Iterator[Message]:
        """The master's messages waiting on the DEALER; a bad one is logged and skipped."""
        while has_message(self.dealer):
            try:
                yield decode(self.dealer.recv())
            except ProtocolError as error:
                log.warning("bad message from the master: %s", error)

    def switch(self) -> SlotSwitch | None:
        """The newest switch, forwarded first to the nodes homed here, if one came."""
        try:
            frame = self.sub.recv(zmq.NOBLOCK)  # CONFLATE: only the newest
        except zmq.Again:
            return None
        if self._relay is not None:
            self._relay.forward_switch(frame)  # first: the relayed nodes wait on it
        try:
            switch = decode(frame)
        except ProtocolError as error:
            log.warning("bad switch message: %s", error)
            return None
        return switch if isinstance(switch, SlotSwitch) else None

    def relay_messages(self) -> None:
        """The nodes homed here sent reports, heartbeats or exits: on to the master."""
        if self._relay is not None:
            self._relay.forward_messages(self._push)

    def send(self, route: Route, message: Message) -> None:
        try:
            (self.dealer if route is Route.MASTER else self._push).send(encode(message), zmq.NOBLOCK)
        except zmq.Again:
            if not self._unreachable:
                log.warning("master unreachable: messages are dropped until it answers")
            self._unreachable = True
            return
        if self._unreachable:
            log.info("master reachable again")
            self._unreachable = False

    def use_master(self, endpoint: str) -> None:
        """Talk to the master at ``endpoint`` from now on: what the last one might still send is not heard."""
        self.dealer.disconnect(self._master)
        self._master = endpoint
        self.dealer.connect(endpoint)
        log.info("saying hello to %s", endpoint)

    def connect(self, welcome: NodeWelcome) -> None:
        """Follow the endpoints the master's welcome names (its own or a relay's)."""
        if self._relay is not None:
            self._relay.serving = welcome.relays
        relayed = welcome.via is not None
        switches = self._follow(self.sub, welcome.switch_endpoint, relayed)
        reports = self._follow(self._push, welcome.report_endpoint, relayed)
        log.info("registered with the master%s; switches from %s, reports to %s",
                 f" through relay {welcome.via}" if welcome.via else "", switches, reports)

    def close(self) -> None:
        # the last exits are on their way on the PUSH socket: a short linger lets them reach the master,
        # which otherwise learns of them only when it misses this node or hears from its next daemon
        self._push.close(linger=_LAST_EXITS_LINGER_MS)
        for socket in self.sockets:
            self._poller.unregister(socket)
        self.dealer.disable_monitor()
        self.connections.close()
        self.dealer.close()
        self.sub.close()
        if self._relay is not None:
            self._relay.close()

    def _follow(self, socket: zmq.Socket[bytes], bound: str, relayed: bool) -> str:
        """Connect ``socket`` to the master's ``bound`` endpoint (or its relay's), leaving the one it had."""
        endpoint = connectable(bound, self._master)
        previous = self._endpoints.get(socket)
        if endpoint != previous:
            if previous is not None:
                socket.disconnect(previous)
            if self._keys is not None:  # a relay presents the nodes' key, the master its own
                socket.curve_serverkey = self._keys.server_key(relay=relayed)
            socket.connect(endpoint)
            self._endpoints[socket] = endpoint
        return endpoint

    def _socket(self, kind: int) -> zmq.Socket[bytes]:
        socket = self._context.socket(kind)
        socket.setsockopt(zmq.LINGER, 0)
        socket.setsockopt(zmq.CONNECT_TIMEOUT, _CONNECT_TIMEOUT_MS)
        socket.setsockopt(zmq.MAXMSGSIZE, 2 * MAX_MESSAGE_BYTES)
        if self._keys is not None:
            self._keys.connect_as(socket, NODE_USER)
        return socket
