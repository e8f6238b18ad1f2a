"""Reservations as a policy sees them: windows of time in which some columns belong to some jobs only
(docs/operations.md, "Reservations"). The master and the simulator give each partition's scheduler
the windows over its columns; the topology (policy/topology.py) then offers the policy's jobs only
the columns the windows leave them, so every policy, time-sharing or not, plans around them with
its own code.

No job may take a window's columns unless it would be gone before the window
opens, judged by its time limit: under time sharing a job holds its
processors for its limit times the rows it shares them with, at most the MPL
(``stretch``), and a job runs a little past its limit before it is killed
(``grace_s``). The jobs of a reservation never go to the policy: the
scheduler places them on their window's columns while it is open
(policy/live_scheduler.py). The policies read the clock they are given: the
scheduler sets ``now`` before each decision.
"""

from dataclasses import dataclass
from typing import Protocol


class Timed(Protocol):
    job_id: int
    estimate: float  # the time limit


@dataclass(frozen=True)
class Reservation:
    """A reservation as the master or the simulator gives it to a partition's scheduler, in node names."""

    name: str
    nodes: frozenset[str]
    start: float  # on the policy's clock
    end: float


@dataclass(frozen=True)
class Window:
    name: str
    columns: int  # the mask of the columns it holds
    start: float  # on the policy's clock
    end: float


@dataclass
class Windows:
    windows: tuple[Window, ...]
    stretch: float = 1.0
    grace_s: float = 0.0
    now: float = 0.0

    def closed_to(self, job: Timed, every: int) -> int:
        """The columns of ``every`` that ``job``, of no reservation, may not take now."""
        now = self.now
        gone_by = now + job.estimate * self.stretch + self.grace_s
        closed = 0
        for window in self.windows:
            if window.end > now and gone_by > window.start:
                closed |= window.columns
        return closed & every

    def open_window(self, name: str, now: float) -> Window | None:
        """Reservation ``name``'s window, if it is open at ``now``."""
        return next((window for window in self.windows if window.name == name and window.start <= now < window.end),
                    None)

    def next_change(self, after: float) -> float | None:
        """The next time a window opens or closes after ``after``: when the policy must decide again."""
        times = [time for window in self.windows for time in (window.start, window.end) if time > after]
        return min(times, default=None)
