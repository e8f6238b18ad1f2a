"""A job's close (or requeue), written whole or not at all, and what the master does while its store
cannot write.

Closing a job is one transaction: its final record and its user's use
(``JobStore.closed``). Only once the store has both does the master's memory
follow: the job leaves the active ones, the user's account counts its use,
and its dependents are released. A write that fails (a full file system, a
locked or broken store) loses nothing: the close waits here, in order, the
job meanwhile ending but not ended (its state is still the stored one), and
the closes are tried again at quantum boundaries, one quantum after the
failure and then every ``RETRY_QUANTA`` quanta, logged at each try that
fails and counted (``store_failures``, ``gangsched_store_write_failures_total``).
When the store can write again, every waiting close is written in the order
the jobs ended, and their dependents start. A job's start is one write too:
one the store cannot take does not happen, and the job waits, out of the
policy, until the next try (``Decisions.retry_store``).
"""

from dataclasses import dataclass

from gangsched.protocol.records import JobState

RETRY_QUANTA = 2  # between tries once one failed: dependents start within 2 quanta of the store's recovery


@dataclass(frozen=True)
class Close:
    state: JobState  # PENDING: a requeue
    end_time: float  # when it ended, not when the store took it


class StoreRetry:
    """When to try the store again after a failed write."""

    def __init__(self, quantum_s: float) -> None:
        self._quantum_s = quantum_s
        self.failures = 0  # failed writes since the master started
        self.next_at: float | None = None  # monotonic seconds; None: nothing waits
        self.postponed: list[int] = []  # jobs whose start it could not write: out of the policy until the next try

    def failed(self, now: float) -> float:
        """A write failed at ``now``: the delay until the next try."""
        delay = self._quantum_s if self.next_at is None else self._quantum_s * RETRY_QUANTA
        self.failures += 1
        self.next_at = now + delay
        return delay

    def refused(self) -> None:
        """A write failed that nothing waits on (a submission, refused whole): only counted."""
        self.failures += 1

    def succeeded(self) -> None:
        self.next_at = None

    def postpone(self, job_id: int) -> None:
        """A job's start could not be written: placed again at the next try."""
        self.postponed.append(job_id)

    def take_postponed(self) -> list[int]:
        """The jobs whose start waits for the next try, in order; none waits after."""
        postponed, self.postponed = self.postponed, []
        return postponed

    def due(self, now: float) -> bool:
        return self.next_at is not None and now >= self.next_at
