"""The policy's decisions carried out for one partition's matrix: the scheduling events settled, the starts and
migrations it orders, the jobs past their time limit, and why each waiting job waits.

The decisions are the batch policy's, the same code the simulator runs
(policy/live_scheduler.py puts it in node names): at each scheduling event it says
which jobs start and which migrate. This part, with the queue it drives
(master/pending.py) and the rotation of its rows (master/rotation.py), is what
one Ousterhout matrix needs.
"""

import logging
import math
from collections.abc import Iterator

from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_signals import JobSignals
from gangsched.master.job_table import JobTable
from gangsched.master.migrations import Migrations
from gangsched.master.pending import PendingQueue
from gangsched.master.placement import describe_shape, where
from gangsched.master.rotation import SlotRotation
from gangsched.master.settings import MasterSettings
from gangsched.master.starting import CannotStart, Starts
from gangsched.master.stats import STEP_BOUNDS_S, Stopwatch, Timings
from gangsched.master.waiting import Wait, WaitKind
from gangsched.policy.live_scheduler import Processor
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class Decisions:
    def __init__(self, settings: MasterSettings, partition: str, table: JobTable, queue: PendingQueue, starts: Starts,
                 migrations: Migrations, endings: Endings, rotation: SlotRotation, signals: JobSignals) -> None:
        self._settings = settings
        self._partition = partition
        self._table = table
        self._queue = queue
        self._starts = starts
        self._migrations = migrations
        self._endings = endings
        self._rotation = rotation
        self._signals = signals
        self._last_tick: float | None = None
        # why each waiting job waits, worked out in job order as far as asked since the last settle
        # (``explain_waiting``; None: from the first waiting job at the next ask); nothing yet to explain
        self._explanation: Iterator[int] | None = iter(())
        self._explained_through = math.inf
        self.decision_time = Timings(STEP_BOUNDS_S)  # of each scheduling event's decisions

    def quantum_ended(self, ran: set[int], now: Now) -> None:
        """Charge the jobs the last switch ran with the quantum that ended; end those past their limit;
        wake the policy if it asked to be woken by now.

        Only a job that ran can have passed its limit since the last boundary.
        """
        elapsed = 0.0 if self._last_tick is None else now.monotonic - self._last_tick
        self._last_tick = now.monotonic
        for job_id in ran:
            job = self._table.get(job_id)
            if job is None or job.state is not JobState.RUNNING or job.suspended:
                continue  # a suspended job's time does not count against its limit
            self._table.charge(job.spec.user, job.ran(elapsed))
            limit = self._table.time_limit(job)
            if job.ending is None and job.limit_near(limit):
                self._signals.before_limit(job)
            if job.ending is None and job.ran_s > limit + self._settings.over_time_s:
                self._endings.decide_end(job, JobState.TIMEOUT, f"ran {job.ran_s:.1f} s, its time limit is {limit:g} s",
                                         now)
        wake_at = self._queue.wake_at
        if wake_at is not None and now.monotonic >= wake_at:
            self._queue.event()
        for job in self._queue.begun(now.wall):
            self._endings.enqueue(job, now)

    def settle(self, now: Now) -> None:
        """After the events of one message or one tick: let the policy decide if one of them asks for it."""
        queue = self._queue
        if not queue.decide_again:
            return
        while queue.decide_again:
            with Stopwatch(self.decision_time):
                changes = queue.decide(now.monotonic)
            for job_id, nodes in changes.starts.items():
                self._start(self._table.jobs[job_id], nodes, now)
            for job_id, nodes in changes.moves.items():
                self._migrations.migrate(self._table.jobs[job_id], nodes, now)
        # why each job waits is worked out when someone asks (``explain_waiting``), not at every event: it
        # visits every waiting job, and at each arrival and end of a flood of small jobs that was most of
        # the master's work (docs/limits.md, "Throughput")
        self._explanation = None

    def _start(self, job: Job, processors: list[Processor], now: Now) -> None:
        job.started(now.wall)
        self._table.started(job)
        try:
            run_now = self._rotation.starts_now(job.job_id, processors)
            if self._starts.launch(job, processors, restore=False, now=now, run_now=run_now):
                log.info("job %d starts on %s", job.job_id, where(processors))
        except CannotStart as failure:
            self._endings.cannot_start(job, failure, now)

    def explain_waiting(self, now: Now, through: int | None = None) -> None:
        """Why each waiting job waits, as the policy left them at the last settle: for the waiting jobs up to
        job ``through`` (None: every one), each once for each settle. In job order, and no further than asked:
        a page of a listing costs its own jobs, not the queue's depth, while a flood's events keep coming."""
        if self._explanation is None:  # a settle since the last ask
            self._explanation, self._explained_through = self._explain(now), 0
        while through is None or self._explained_through < through:
            explained = next(self._explanation, None)
            if explained is None:
                self._explained_through = math.inf
                return
            self._explained_through = explained

    def _explain(self, now: Now) -> Iterator[int]:
        """Explains the waiting jobs one by one, in job order, yielding each one's id."""
        scheduler = self._queue.scheduler
        up = len(scheduler.columns)
        first = True
        memory = scheduler.memory_room()
        table = self._table
        for job_id in list(table.jobs):  # in job order; one that left since is skipped
            job = table.jobs.get(job_id)
            if job is None or job.state is not JobState.PENDING or job.spec.partition != self._partition \
                    or self._queue.holds_back(job):
                continue
            if scheduler.is_held(job.job_id):
                detail = f"{describe_shape(job.spec)}, {up} processors up"
                if now.monotonic < table.rejoin_until:
                    detail += " (nodes rejoining after a master restart)"
                job.waits(Wait(WaitKind.NODES, detail))
            elif job.wait is None or not job.wait.keeps_its_turn:
                reserved = scheduler.window_in_the_way(job.job_id) if scheduler.reservations else None
                if reserved is not None:
                    job.waits(Wait(WaitKind.RESERVATION if reserved == job.spec.reservation else WaitKind.RESERVED,
                                   reserved))
                elif memory is not None and not memory(table.policy_job(job, now)):
                    job.waits(Wait(WaitKind.RESOURCES_MEMORY))
                else:
                    job.waits(Wait(WaitKind.RESOURCES if first else WaitKind.PRIORITY))
                first = False
            yield job_id
