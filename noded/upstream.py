"""Where a node's switches come from and its messages go: the master, or a relay (docs/architecture.md,
'Relays'). Plain code on a passed clock: the node's core asks it when a silent relay counts as lost."""

import logging

from gangsched.protocol.messages import NodeWelcome

log = logging.getLogger("gangsched.noded")


class Upstream:
    """Where this node's switches come from and its messages go: the master, or the relay the
    master homed it at, which it leaves when no switch came through it for two quanta or a
    heartbeat period, whichever is longer (a switch comes every quantum)."""

    def __init__(self, watch_master: bool = False) -> None:
        """``watch_master``: the master's silence counts too (where several masters share a store, a
        silent leader may have lost the lead to another)."""
        self._watch_master = watch_master
        self.via: str | None = None  # the relay; None: the master
        self.left: str | None = None  # the relay left for silence, until the next welcome
        self.heard_at = 0.0  # monotonic: when the last switch came
        self._silence_s = 0.0

    def welcomed(self, welcome: NodeWelcome, now: float) -> None:
        self.via, self.left = welcome.via, None
        self._silence_s = max(2 * welcome.quantum_ms / 1000, welcome.heartbeat_ms / 1000)
        self.heard_at = now

    def lost_at(self) -> float | None:
        """When the relay is taken for lost if no switch comes before; None: homed at the master."""
        return None if self.via is None and not self._watch_master else self.heard_at + self._silence_s

    def leave(self, now: float) -> None:
        log.warning("no switch through %s for %.1f s: registering with %s",
                    f"relay {self.via}" if self.via else "the master", now - self.heard_at,
                    "the master again" if self.via else "whichever master leads")
        self.left, self.via = self.via, None
