"""Timers as data: a daemon's named deadlines, the first of which its loop waits for.

The node's core keeps every timer here (the next heartbeat or hello, a report held
back, a look for new processes, a relay's silence, each ending task's kill), so its
loop asks one question, when the next falls due, instead of keeping a field for each.
"""

import math
from collections.abc import Hashable


class Deadlines:
    def __init__(self) -> None:
        self._at: dict[Hashable, float] = {}  # monotonic seconds

    def set(self, name: Hashable, at: float) -> None:
        self._at[name] = at

    def clear(self, name: Hashable) -> None:
        self._at.pop(name, None)

    def get(self, name: Hashable) -> float | None:
        return self._at.get(name)

    def next(self) -> float:
        """The first deadline; infinity where none is set."""
        return min(self._at.values(), default=math.inf)

    def pop_due(self, name: Hashable, now: float) -> bool:
        """Whether ``name`` is due at ``now``; a due one is cleared, to be set again if wanted."""
        at = self._at.get(name)
        if at is None or at > now:
            return False
        del self._at[name]
        return True
