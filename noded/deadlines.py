"""Timers as data: a daemon's named deadlines, the first of which its loop waits for.

The node's core keeps every timer here (the next heartbeat or hello, a report held
back, a look for new processes, a relay's silence, each ending task's kill), so its
loop asks one question, when the next falls due, instead of keeping a field for each.
"""

import math
from collections.abc import Hashable, Set


class Deadlines:
    def __init__(self) -> None:
        self._at: dict[Hashable, float] = {}  # monotonic seconds
        # the first deadline, kept as they change: a loop asks for it at every wake-up, and a thousand
        # daemons in one process (`gang bench scale`) ask a thousand times a switch
        self.first = math.inf

    def set(self, name: Hashable, at: float) -> None:
        previous = self._at.get(name)
        self._at[name] = at
        if at < self.first:
            self.first = at
        elif previous == self.first:
            self.first = min(self._at.values())

    def clear(self, name: Hashable) -> None:
        if self._at.pop(name, math.inf) == self.first:
            self.first = min(self._at.values(), default=math.inf)

    def get(self, name: Hashable) -> float | None:
        return self._at.get(name)

    def take_due(self, now: float) -> Set[Hashable]:
        """The names due at ``now``, each cleared, to be set again if wanted: one call a wake-up, on
        a core whose caches the jobs keep cold."""
        due = {name for name, at in self._at.items() if at <= now}
        if due:
            for name in due:
                del self._at[name]
            self.first = min(self._at.values(), default=math.inf)
        return due
