"""Which master a node talks to among those it was given (``--master tcp://m1:7070,tcp://m2:7070``), and
the newest leader epoch it has seen (docs/architecture.md, "Leadership"). Plain code: the node's core
asks it where its next hello goes and whether a message of the master is to be obeyed.

A node obeys only the newest epoch it has seen: a message of an older leader (one that was stopped
or cut off and has not yet found that another leads) is refused and counted. While it is not
registered, each hello that went unanswered sends the next to the next master of the list; a
standby's answer names the leader, and the next hello goes there.
"""

import logging

# a master that took the lead answers a hello once it has read the store, later on a busy host: a
# hello is taken for unanswered after this long, not at the next heartbeat (its answer would find the
# node gone elsewhere, and the master would take the node for lost). A master that does not lead
# answers at once (not_leader), and one fallen silent is left at once (``lost``)
ANSWER_WAIT_S = 3.0

log = logging.getLogger("gangsched.noded")


class Masters:
    def __init__(self, endpoints: tuple[str, ...]) -> None:
        """``endpoints``: the masters' ROUTER endpoints; empty: one master, which the link knows."""
        self._endpoints = endpoints
        self._at = 0
        self._answered = True  # since the last hello
        self._asked_at = -ANSWER_WAIT_S  # when the master asked now was first sent a hello
        self.epoch = 0  # the newest leader epoch seen
        self.stale_refused = 0  # messages of an older epoch refused

    @property
    def several(self) -> bool:
        return len(self._endpoints) > 1

    def obeys(self, epoch: int, kind: str) -> bool:
        """Whether a ``kind`` message of leader epoch ``epoch`` is to be obeyed (it raises the newest seen)."""
        if epoch >= self.epoch:
            self.epoch = epoch
            return True
        self.stale_refused += 1
        if self.stale_refused & (self.stale_refused - 1) == 0:  # the 1st, 2nd, 4th, ...: a stale leader may go on
            log.warning("refused a %s of leader epoch %d: epoch %d leads (%d refused so far)",
                        kind, epoch, self.epoch, self.stale_refused)
        return False

    def hello_to(self, now: float) -> str | None:
        """A hello is about to go at ``now``: the master to send it to instead of the last, if it changes."""
        if not self.several:
            return None
        if self._answered:
            self._answered, self._asked_at = False, now
            return None
        if now - self._asked_at < ANSWER_WAIT_S:
            return None
        self._at, self._asked_at = (self._at + 1) % len(self._endpoints), now
        return self._endpoints[self._at]

    def answered(self) -> None:
        self._answered = True

    def not_leader(self, leader: str | None) -> str | None:
        """A standby answered: the master to say hello to next, if it changes (the leader it names, if this
        node knows it; else the next of the list)."""
        self._answered = True
        if leader in self._endpoints and leader != self._endpoints[self._at]:
            self._at = self._endpoints.index(leader)
            return leader
        self._answered = False  # none named: the next hello goes to the next
        return None

    def lost(self) -> None:
        """The leader fell silent: the next hello goes to the next master, at once."""
        self._answered, self._asked_at = False, -ANSWER_WAIT_S
