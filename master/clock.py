"""One reading of the clocks, taken by the master's loop for each event and passed in.

Every part of the core is given the ``Now`` of the event it handles and reads no
clock of its own, so one decision never sees two "now"s; tests give the core a
fake reading (tests/conftest.py).
"""

import time
from typing import NamedTuple


class Now(NamedTuple):
    monotonic: float  # seconds of the monotonic clock, for every interval and deadline
    monotonic_ns: int  # the same reading in nanoseconds, as the wire carries it
    wall: float  # Unix seconds, for what users read (submit, start and end times)

    @classmethod
    def at(cls, monotonic_ns: int, wall: float) -> "Now":
        return cls(monotonic_ns / 1e9, monotonic_ns, wall)

    def monotonic_of(self, unix_time: float) -> float:
        """The monotonic seconds of an instant given in Unix time."""
        return self.monotonic - (self.wall - unix_time)


def read_clock() -> Now:
    return Now.at(time.monotonic_ns(), time.time())
