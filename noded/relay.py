"""A node's relay sockets: where the master may home other nodes (docs/architecture.md, 'Relays').

The PUB forwards each switch frame as it came from the master, undecoded, before
this node applies it. The PULL takes the relayed nodes' reports, heartbeats and
exits, which go on to the master over this node's own PUSH socket frame by frame,
in the order they came: each names its node, and the master checks it as if it
had come straight, so a relay neither decodes nor changes them.

A frame on the PULL reaches the master as a node's word, so these sockets are as
closed as the master's own: without keys, ipc sockets in a 0700 folder of the
spool; with keys, CURVE servers with the nodes' key pair that let in only the
nodes' key. A node without keys whose peers reach it over tcp cannot relay (every
account of every host could speak through it), and says so in its hello.
"""

import logging
from pathlib import Path

import zmq

from gangsched.daemon.curve import NODE_USER, KeyFolder
from gangsched.daemon.endpoints import UnsafeBind, private_ipc, reachable_at
from gangsched.protocol.records import RelayEndpoints

log = logging.getLogger("gangsched.noded")

# frames forwarded in one wake-up at most: the relay's own switch must not wait behind a flood
_FORWARD_PER_WAKE = 4096


class NodeRelay:
    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], switch: str, report: str,
                 keys: KeyFolder | None, advertised_host: str | None) -> None:
        """Bind ``switch`` (PUB) and ``report`` (PULL); ``advertised_host``: for tcp, the address the
        other nodes reach this one at (the sockets bind every interface)."""
        self._authenticator = keys.relay_authenticator(context) if keys is not None else None
        self.pub = context.socket(zmq.PUB)
        self.pull = context.socket(zmq.PULL)
        bound = []
        try:
            for socket, endpoint in ((self.pub, switch), (self.pull, report)):
                socket.setsockopt(zmq.LINGER, 0)
                if keys is not None:
                    keys.serve(socket, NODE_USER)
                socket.bind(endpoint)
                endpoint = socket.getsockopt_string(zmq.LAST_ENDPOINT)
                bound.append(endpoint if advertised_host is None else reachable_at(endpoint, advertised_host))
        except zmq.ZMQError:
            self.close()  # an open socket would hold up the context's end
            raise
        self.endpoints = RelayEndpoints(switch=bound[0], report=bound[1])
        self.serving = False  # the master's welcome says whether it homed nodes here

    @classmethod
    def open(cls, context: zmq.Context[zmq.Socket[bytes]], spool: Path, keys: KeyFolder | None,
             tcp_host: str | None) -> "NodeRelay | None":
        """The relay sockets this node may bind: tcp on ``tcp_host``'s ports with keys, else ipc in the
        spool; None where neither is safe."""
        if keys is None and tcp_host is not None:
            log.info("relays for no other node: over tcp without keys, any account could speak through it")
            return None
        try:
            if keys is not None and tcp_host is not None:
                return cls(context, "tcp://*:*", "tcp://*:*", keys, tcp_host)
            switch, report = (f"ipc://{spool / 'relay' / name}" for name in ("switch.sock", "report.sock"))
            private_ipc(switch)
            return cls(context, switch, report, keys, None)
        except (UnsafeBind, zmq.ZMQError) as error:  # e.g. a spool path too long for an ipc socket
            log.warning("cannot relay for other nodes: %s", error)
            return None

    def forward_switch(self, frame: bytes) -> None:
        if self.serving:
            self.pub.send(frame, zmq.NOBLOCK)  # a PUB never blocks: a slow node drops, and converges later

    def forward_messages(self, upstream: zmq.Socket[bytes]) -> None:
        """The relayed nodes' frames waiting, on to the master through ``upstream``."""
        dropped = 0
        for _ in range(_FORWARD_PER_WAKE):
            try:
                frame = self.pull.recv(zmq.NOBLOCK)
            except zmq.Again:
                break
            try:
                upstream.send(frame, zmq.NOBLOCK)
            except zmq.Again:  # the master unreachable: each node's hello (over its own DEALER) recovers
                dropped += 1
        if dropped:
            log.warning("master unreachable: %d relayed node messages dropped", dropped)

    def close(self) -> None:
        self.pub.close()
        self.pull.close()
        if self._authenticator is not None:
            self._authenticator.stop()
