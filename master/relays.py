"""The relay tree: which node each node hears switches from and sends its messages through.

With many nodes the master's cost per quantum is mostly per connection: the
switch written to each one and the reports read from each one. So beyond
``fanout`` nodes homed at the master, some nodes relay for others: a relay's
PUB forwards each switch frame as it came, and its PULL forwards its nodes'
reports, heartbeats and exits to the master, frame by frame and in order. The
master then writes each switch to about N / fanout connections and reads as
many; every message still names its node, so nothing else changes.

Two levels only: relays are homed at the master. A node registering goes to
the open relay with the fewest nodes, if one has room; else it is homed at the
master, and once ``fanout`` nodes are, it becomes a relay itself. A node that
heard no switch through its relay for too long registers again naming it
(``NodeHello.left_relay``); that relay takes no new nodes until it registers
again itself, and its other nodes leave it the same way. A lost relay's nodes
thus lose at most the messages in flight through it (their exits are resent
with the hello), never their place.
"""

from typing import NamedTuple

from gangsched.protocol.records import RelayEndpoints


class Home(NamedTuple):
    via: str | None  # the relay; None: the master
    endpoints: RelayEndpoints | None  # the relay's; None: the master's own
    relays: bool  # the node itself relays for others


_MASTER = Home(None, None, False)


class RelayTree:
    def __init__(self, fanout: int) -> None:
        self._fanout = fanout  # 0: no relays
        self._direct: set[str] = set()  # homed at the master, relays among them
        self._relays: dict[str, RelayEndpoints] = {}
        self._nodes_of: dict[str, set[str]] = {}  # each relay's nodes
        self._via: dict[str, str] = {}  # each relayed node's relay
        self._closed: set[str] = set()  # relays that take no new nodes

    def home(self, node: str, endpoints: RelayEndpoints | None, left: str | None) -> Home:
        """Where ``node``, registering, is homed; ``endpoints``: where it would relay, if it can;
        ``left``: the relay it left for silence."""
        self._leave(node)
        if left is not None and left in self._relays:
            self._closed.add(left)
        if node in self._relays:  # a relay registering again: its nodes may still be connected to it
            if endpoints is None:
                self._drop_relay(node)
            else:
                self._relays[node] = endpoints
                self._closed.discard(node)
                self._direct.add(node)
                return Home(None, None, True)
        relay = self._open_relay()
        if relay is not None:
            self._via[node] = relay
            self._nodes_of[relay].add(node)
            return Home(relay, self._relays[relay], False)
        self._direct.add(node)
        if self._fanout == 0 or endpoints is None or len(self._direct) <= self._fanout:
            return _MASTER
        self._relays[node] = endpoints
        self._nodes_of[node] = set()
        return Home(None, None, True)

    def lost(self, node: str) -> None:
        """``node`` is down: homed nowhere, and as a relay it takes no new nodes (its nodes leave it)."""
        self._leave(node)
        if node in self._relays:
            self._closed.add(node)

    def via(self, node: str) -> str | None:
        return self._via.get(node)

    def relays(self) -> list[str]:
        return sorted(self._relays)

    def _open_relay(self) -> str | None:
        """The open relay with room and the fewest nodes (the first by name among equals)."""
        best: str | None = None
        for relay, nodes in self._nodes_of.items():
            if relay in self._closed or len(nodes) >= self._fanout:
                continue
            if best is None or (len(nodes), relay) < (len(self._nodes_of[best]), best):
                best = relay
        return best

    def _leave(self, node: str) -> None:
        self._direct.discard(node)
        relay = self._via.pop(node, None)
        if relay is not None:
            self._nodes_of[relay].discard(node)

    def _drop_relay(self, node: str) -> None:
        del self._relays[node]
        for relayed in self._nodes_of.pop(node):
            del self._via[relayed]  # they leave it for silence, and are homed anew then
        self._closed.discard(node)
