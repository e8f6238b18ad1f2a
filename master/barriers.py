"""The address each job's rank 0 binds for its barrier, handed out by the master.

Every rank needs it before it starts, so the master picks it: a socket file in
the node's folder (ipc, one machine) or a port from the node's range (tcp).
"""

from gangsched.protocol.records import PeerEndpoint


class NoFreePort(Exception):
    pass


class BarrierEndpoints:
    def __init__(self) -> None:
        self._ports: dict[str, set[int]] = {}  # rank-0 node -> ports in use

    def allocate(self, name: str, node: str, peer: PeerEndpoint, user: str) -> tuple[str, str, int | None]:
        """(address every rank connects to, address rank 0 binds, port to release later) for the step ``name``
        (protocol/records.py ``step_name``). An ipc socket is in
        the job's user's own folder of the node's (the node makes it theirs, 0700): rank 0, which runs as
        them, may make it there, and no other account may reach it."""
        if peer.transport == "ipc":
            address = f"ipc://{peer.host}/{user}/{name}.barrier"
            return address, address, None
        port = self._take(node, peer.ports or (1, 0))  # the protocol requires ports for tcp
        return f"tcp://{peer.host}:{port}", f"tcp://*:{port}", port

    def rendezvous(self, node: str, peer: PeerEndpoint) -> tuple[str, int] | None:
        """``host:port`` for a job's MASTER_ADDR and MASTER_PORT on its rank-0 node, and the port;
        None where the node offers no ports."""
        if peer.ports is None:
            return None
        port = self._take(node, peer.ports)
        host = "127.0.0.1" if peer.transport == "ipc" else peer.host  # ipc: every node is this machine
        return f"{host}:{port}", port

    def _take(self, node: str, ports: tuple[int, int]) -> int:
        used = self._ports.setdefault(node, set())
        low, high = ports
        port = next((port for port in range(low, high + 1) if port not in used), None)
        if port is None:
            raise NoFreePort(f"node {node} has no free port in {low}-{high}")
        used.add(port)
        return port

    def reserve(self, node: str, port: int) -> None:
        self._ports.setdefault(node, set()).add(port)

    def release(self, node: str, port: int | None) -> None:
        if port is not None:
            self._ports.get(node, set()).discard(port)
