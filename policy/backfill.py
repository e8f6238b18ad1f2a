"""Space-sharing policies: FCFS, EASY and conservative backfilling, the baselines of
Talby & Feitelson 1999 (docs/policies.md).

Each job gets its processors to itself from start to end (rate 1), in
priority order (arrival order among equal priorities: policy/priority_order.py)
unless backfilled.

* FCFS starts jobs from the head of the queue while they fit: no job starts
  before a waiting job of higher priority.
* EASY (Lifka) also starts a later job when it fits now and does not delay the
  head: it ends, by its estimate, before the head's reserved start (the
  "shadow" time), or it only uses processors the head will not need then.
  The head is the highest-priority waiting job at each pass. Invariant: while
  the order does not change, the head never starts later than the shadow time
  computed when it became the head; a reorder may give the reservation to
  another job, as Slurm's backfilling does at each of its passes.
* Conservative backfilling gives every job a reservation on arrival, at the
  first hole of the profile that holds it. When a job ends before its
  estimate, the queue is compressed: in priority order, each job moves to the
  earliest hole that now holds it. Invariant: no job ever starts later than
  its first reservation, whatever the priorities do (they decide only who
  takes a hole first).
"""

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from gangsched.policy.column_book import ColumnBook
from gangsched.policy.columns import Layout
from gangsched.policy.interface import Decision, Job, SpaceSharing
from gangsched.policy.priority_order import enqueue, insert_in_order, reorder, reorder_jobs
from gangsched.policy.profile import Profile
from gangsched.policy.topology import Topology

_EPSILON = 1e-9


@dataclass
class _QueuePolicy(SpaceSharing):
    """The common ground of FCFS and EASY: a queue and the running jobs' estimated ends."""

    procs: int
    topology: Topology | None = None  # None: one processor per node
    queue: list[Job] = field(default_factory=list)
    ends: dict[int, tuple[float, int]] = field(default_factory=dict)  # running: estimated end, procs
    columns: ColumnBook = field(init=False)

    def __post_init__(self) -> None:
        self.columns = ColumnBook(self.topology or Topology.uniform(self.procs))

    @property
    def free(self) -> int:
        return self.columns.free.bit_count()

    def submit(self, job: Job, now: float) -> None:
        enqueue(self.queue, job)

    def reorder(self, now: float) -> None:
        reorder_jobs(self.queue)

    def finish(self, job: Job, now: float) -> None:
        del self.ends[job.job_id]
        self.columns.give(job.job_id)

    def layout(self) -> Layout:
        return self.columns.layout()

    def adopt(self, job: Job, columns: int, started: float, now: float) -> None:
        self.columns.hold(job, columns)
        self.ends[job.job_id] = (started + job.estimate, job.procs)

    def withdraw(self, job: Job, now: float) -> None:
        self.queue.remove(job)

    def _start(self, job: Job, now: float, started: Decision) -> None:
        self.columns.take(job)
        self.ends[job.job_id] = (now + job.estimate, job.procs)
        started.rates[job.job_id] = 1.0

    def _start_from_head(self, now: float, started: Decision) -> None:
        while self.queue and self.columns.fits(self.queue[0]):
            self._start(self.queue.pop(0), now, started)


class FcfsPolicy(_QueuePolicy):
    name = "fcfs"

    def schedule(self, now: float) -> Decision:
        started = Decision()
        self._start_from_head(now, started)
        return started


class EasyPolicy(_QueuePolicy):
    name = "easy"

    def schedule(self, now: float) -> Decision:
        started = Decision()
        self._start_from_head(now, started)
        free = self.free
        # the cheap tests first: a trace's queue is scanned at every event, mostly on a full machine,
        # so the head's shadow is only worked out (a sort of the running jobs) once a job could use it
        if len(self.queue) < 2 or free == 0:
            return started
        shadow: float | None = None
        extra = 0  # the processors spare at the shadow time
        waiting = []
        for position, job in enumerate(self.queue[1:], start=1):
            if free == 0:
                waiting.extend(self.queue[position:])
                break
            if job.procs > free:
                waiting.append(job)
                continue
            if shadow is None:
                shadow, extra = self._shadow(self.queue[0].procs, now)
            ends_in_time = now + job.estimate <= shadow
            if (ends_in_time or job.procs <= extra) and self.columns.fits(job):
                self._start(job, now, started)
                free -= job.procs
                if not ends_in_time:
                    extra -= job.procs
            else:
                waiting.append(job)
        self.queue[1:] = waiting
        return started

    def _shadow(self, needed: int, now: float) -> tuple[float, int]:
        """When the head can start by the running jobs' estimates, and the processors spare then."""
        available = self.free
        for end, procs in sorted(self.ends.values()):
            available += procs
            if available >= needed:
                return max(end, now), available - needed
        return float("inf"), 0  # unreachable: a prepared job always fits the machine


@dataclass
class Plan:
    """A queued job's place in the profile."""

    job: Job
    start: float

    @property
    def end(self) -> float:
        return self.start + self.job.estimate


PlanT = TypeVar("PlanT", bound=Plan)


def _plan_priority(plan: Plan) -> float:
    return plan.job.priority


class PlanningPolicy(SpaceSharing, Generic[PlanT]):
    """The common ground of profile-based backfilling: reservations that start when due."""

    name = "planning"

    def __init__(self, procs: int, topology: Topology | None = None) -> None:
        self.profile = Profile(procs)
        self.columns = ColumnBook(topology or Topology.uniform(procs))
        self.planned: dict[int, PlanT] = {}  # priority order, then arrival order
        self.running: dict[int, tuple[float, int]] = {}  # estimated end, procs

    def finish(self, job: Job, now: float) -> None:
        end, procs = self.running.pop(job.job_id)
        self.columns.give(job.job_id)
        if end > now:
            self.profile.advance(now)
            self.profile.release(procs, now, end)
            self._replan(now)

    def layout(self) -> Layout:
        return self.columns.layout()

    def withdraw(self, job: Job, now: float) -> None:
        """Its plan is given up, and the queue compressed into the room it leaves, as at an early end."""
        plan = self.planned.pop(job.job_id)
        self.profile.advance(now)
        self.profile.release(job.procs, max(plan.start, now), plan.end)
        self._replan(now)

    def adopt(self, job: Job, columns: int, started: float, now: float) -> None:
        self.columns.hold(job, columns)
        end = started + job.estimate
        self.running[job.job_id] = (end, job.procs)
        if end > now:
            self.profile.advance(now)
            self.profile.reserve(job.procs, now, end)

    def reorder(self, now: float) -> None:
        """Reservations stay where they are; the next compression takes the queue in its new order."""
        plans = list(self.planned.values())
        if reorder(plans, _plan_priority):
            self.planned = {plan.job.job_id: plan for plan in plans}

    def _add_plan(self, plan: PlanT) -> None:
        """After every plan of its job's priority or higher: most often the end."""
        last = next(reversed(self.planned.values()), None)
        if last is None or last.job.priority >= plan.job.priority:
            self.planned[plan.job.job_id] = plan
            return
        plans = list(self.planned.values())
        insert_in_order(plans, plan, _plan_priority)
        self.planned = {each.job.job_id: each for each in plans}

    def schedule(self, now: float) -> Decision:
        started = Decision()
        next_start = math.inf
        due = now + _EPSILON
        for job_id, plan in self.planned.items():  # at every event: the cheap test first
            if plan.start > due:
                if plan.start < next_start:
                    next_start = plan.start
            # a live job may overrun its estimate until it is killed: then a due plan waits for its end
            elif self.columns.fits(plan.job):
                started.rates[job_id] = 1.0
                self.running[job_id] = (plan.end, plan.job.procs)
                self.columns.take(plan.job)
        for job_id in started.rates:
            del self.planned[job_id]
        # a plan's start is not always the end of another job: compression can move that job away
        started.wake_at = next_start if next_start < math.inf else None
        return started

    def _replan(self, now: float) -> None:
        """Use the room a job left by ending before its estimate."""
        compress(self.profile, list(self.planned.values()), now)


class ConservativePolicy(PlanningPolicy[Plan]):
    name = "conservative"

    def submit(self, job: Job, now: float) -> None:
        self.profile.advance(now)
        start = self.profile.earliest(job.procs, job.estimate, now)
        self.profile.reserve(job.procs, start, start + job.estimate)
        self._add_plan(Plan(job, start))


def compress(profile: Profile, plans: Sequence[Plan], now: float) -> None:
    """Move each plan, in the order given, to the earliest hole that holds it; none moves later."""
    for plan in plans:
        if plan.start <= now:
            continue
        job = plan.job
        earlier = profile.earlier_start(job.procs, job.estimate, now, held=plan.start)
        if earlier < plan.start:
            profile.release(job.procs, plan.start, plan.end)
            profile.reserve(job.procs, earlier, earlier + job.estimate)
            plan.start = earlier
