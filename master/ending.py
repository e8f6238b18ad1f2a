"""How a job ends: the first cause decides its final state, its other tasks are killed, and its
close (or requeue) is written whole before the master's memory follows (master/closing.py).

A rank's end is acknowledged to its node only once the store has it: the job's
close, or, while other ranks of the job run, the job without the rank. Until
then the node keeps the end and says it again in its next hello, so a master
that restarts in between neither loses it nor takes the rank for vanished.

A job: PENDING -> RUNNING -> a final state once every task of every step has
exited. The final state is decided by the first thing that goes wrong
(``Job.ending``): a rank of its step 0 that fails, a cancel, the time limit
(TIMEOUT), a lost node (NODE_FAIL, or back to PENDING if the user asked for
requeue); or by its step 0's end, which ends its other steps (master/job_steps.py).
A task of another step that fails ends that step alone. A job leaves the policy
as soon as its end is decided. A closed job's dependents are released.
"""

import logging
from collections import deque

from gangsched.master.clock import Now
from gangsched.master.closing import Close, StoreRetry
from gangsched.master.job_record import Job
from gangsched.master.job_steps import TaskId
from gangsched.master.job_table import JobTable
from gangsched.master.migrations import Migrations
from gangsched.master.pending import Queues
from gangsched.master.placement import where
from gangsched.master.starting import CannotStart, Starts
from gangsched.master.store import JobStore, RecordRefused, StoreWriteError
from gangsched.protocol.messages import ExitAck, KillTask, Message
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class Endings:
    def __init__(self, store: JobStore, table: JobTable, queues: Queues, starts: Starts,
                 migrations: Migrations, retry: StoreRetry, outbox: deque[tuple[str, Message]]) -> None:
        self._store = store
        self._table = table
        self._queues = queues
        self._starts = starts
        self._migrations = migrations
        self._retry = retry
        self._outbox = outbox
        self._closing: dict[int, Close] = {}  # ended jobs whose end the store has not taken yet
        # the acknowledgements of rank ends the store has not taken yet (a write failed), by job, to their nodes
        self._unwritten_ends: dict[int, list[tuple[str, ExitAck]]] = {}

    @property
    def waiting_for_store(self) -> bool:
        return bool(self._closing or self._unwritten_ends)

    def acknowledge(self, job: Job, node: str, ack: ExitAck, now: Now) -> ExitAck | None:
        """A rank of ``job`` ended (``ranks_gone`` took it): ``ack``, once the store has the end; None while it
        waits for the store (the job's close, or the job without the rank if others run), held until then."""
        job_id = job.job_id
        if job_id not in self._closing and job_id not in self._unwritten_ends:
            if not job.live_tasks() or self._saved(job, now):  # no rank left: its close is written (or a restart's)
                return ack
        self._unwritten_ends.setdefault(job_id, []).append((node, ack))
        return None

    def enqueue(self, job: Job, now: Now) -> None:
        """A pending job goes to the policy once the jobs it depends on allow; it is cancelled if they
        never will."""
        never = self._queues.of(job).enqueue(job, now)
        if never is not None:
            self.close(job, JobState.CANCELLED, now, f"DependencyNeverSatisfied: {never}")

    def withdraw(self, job: Job, reason: str, now: Now) -> None:
        """A pending job leaves the queue for good (cancelled)."""
        self._queues.of(job).withdraw(job, now)
        self.close(job, JobState.CANCELLED, now, reason)

    def cannot_start(self, job: Job, failure: CannotStart, now: Now) -> None:
        self.close(job, JobState.FAILED, now, str(failure))

    def decide_end(self, job: Job, state: JobState, reason: str, now: Now, overriding: bool = False) -> None:
        """The first cause decides how a running job ends (unless ``overriding``: its record cannot be
        stored): it leaves the policy, its other tasks are killed."""
        if not job.end_decided(state, reason, overriding):
            return
        log.info("job %d ends as %s: %s", job.job_id, state, reason)
        self._queues.of(job).left_the_policy(job, now)
        for node in job.running_nodes():
            self._outbox.append((node, KillTask(job_id=job.job_id, reason=reason)))

    def step_failed(self, job: Job, step_id: int, rank: int, reason: str, exit_code: int | None, now: Now) -> None:
        """A task of a step other than the first failed: the step ends, its other tasks killed; the job goes on."""
        job.ranks_gone(step_id, {rank}, exit_code, now.wall)
        step = job.steps[step_id]
        log.info("job %d step %d ends: %s", job.job_id, step_id, reason)
        for node in sorted({step.node_of(other, job.node_names) for other in step.live_ranks}):
            self._outbox.append((node, KillTask(job_id=job.job_id, step=step_id, reason=reason)))
        self._gone(job, step_id, {rank}, now)

    def tasks_gone(self, job: Job, tasks: set[TaskId], ending: tuple[JobState, str] | None, now: Now) -> None:
        """Tasks of ``job``, of any of its steps, were lost; ``ending`` says if that ends the job."""
        for step_id in sorted({step for step, _ in tasks}):
            self.ranks_gone(job, step_id, {rank for step, rank in tasks if step == step_id}, ending, now)

    def ranks_gone(self, job: Job, step_id: int, ranks: set[int], ending: tuple[JobState, str] | None, now: Now,
                   exit_code: int | None = None) -> None:
        """Tasks of step ``step_id`` of ``job`` exited or were lost; ``ending`` says if that ends the job."""
        job.ranks_gone(step_id, ranks, exit_code if ending is not None else None, now.wall,
                       None if ending is None else ending[0])
        if ending is not None:
            self.decide_end(job, *ending, now)
        self._gone(job, step_id, ranks, now)

    def _gone(self, job: Job, step_id: int, ranks: set[int], now: Now) -> None:
        """What follows the end of tasks: their step's, once it has none left; the job's, once no step has."""
        for rank in ranks:
            self._starts.arrived(job.job_id, step_id, rank)
        step = job.steps[step_id]
        if step.live_ranks:
            return
        self._starts.release_ports(job, step)
        if step_id == 0 and job.ending is None and job.live_tasks():  # its other steps end with it
            self.decide_end(job, JobState.COMPLETED, "", now)
        if job.live_tasks():
            return
        self._table.adopted(job)
        target = self._migrations.to_restart(job)
        if target is not None:
            try:
                if self._starts.launch(job, target, restore=True, now=now):
                    log.info("job %d restarts on %s from barrier %d", job.job_id, where(target), job.barriers)
            except CannotStart as failure:
                self.cannot_start(job, failure, now)
            return
        if job.ending is None:  # every rank ended well: the job is done
            self._queues.of(job).left_the_policy(job, now)
        if job.ending is JobState.PENDING:
            self._closing[job.job_id] = Close(JobState.PENDING, now.wall)  # a requeue, written as a close is
            self.write_closes(now)
        else:
            self.close(job, job.ending or JobState.COMPLETED, now)

    def close(self, job: Job, state: JobState, now: Now, reason: str | None = None) -> None:
        """The job ended ``state`` (for ``reason``, if given): it is closed once the store has its end
        (master/closing.py)."""
        self._closing[job.job_id] = Close(state, now.wall)
        job.closing(state, reason)
        self.write_closes(now)

    def write_closes(self, now: Now) -> None:
        """Write the closes and requeues that wait, in the order the jobs ended; each one the store takes
        takes effect: a closed job leaves, its user's use counts, its dependents are released; a requeued
        one goes back to the policy. Then the rank ends that wait (``acknowledge``)."""
        for job_id, close in list(self._closing.items()):
            job = self._table.jobs[job_id]
            account = None
            if close.state is JobState.PENDING:
                written = job.requeued(self._table.predictor())
            else:
                written = job.as_closed(close.state, close.end_time)
                if job.ran_s or job.cpu_ns:  # its user's use, charged as it accrued, written with its close
                    account = self._table.account(job.spec.user)
            try:
                try:
                    self._store.closed(written, account)
                except RecordRefused as refused:  # this job's record alone: written failed, without its measures
                    job.end_decided(JobState.FAILED, self._refused(job, refused), overriding=True)
                    close = self._closing[job_id] = Close(JobState.FAILED, close.end_time)
                    written = job.as_closed(JobState.FAILED, close.end_time)
                    self._store.closed(written, account)
            except StoreWriteError as error:
                delay = self._retry.failed(now.monotonic)
                log.error("the job store cannot write job %d's %s (%s): %d wait, tried again in %.1f s", job_id,
                          "requeue" if close.state is JobState.PENDING else "end", error, len(self._closing), delay)
                return
            if not self._retry.postponed:  # else the postponed starts are due at the next try
                self._retry.succeeded()
            del self._closing[job_id]
            self._outbox.extend(self._unwritten_ends.pop(job_id, ()))
            self._queues.of(job).event()
            if close.state is JobState.PENDING:
                self._table.add(written)
                self._queues.of(written).resubmit(written, now)
                continue
            self._table.remove(job)
            job.closed(written)
            log.info("job %d %s", job_id, close.state)
            for released in [*self._queues.dependents_of(job), *self._queues.of(job).left(job)]:
                self.enqueue(released, now)
        self._write_rank_ends(now)

    def _write_rank_ends(self, now: Now) -> None:
        """The running jobs whose rank ends the store could not take, written again: each the store takes
        has its ends acknowledged."""
        for job_id in [job_id for job_id in self._unwritten_ends if job_id not in self._closing]:
            job = self._table.jobs.get(job_id)
            if job is not None and not self._saved(job, now):
                return
            self._outbox.extend(self._unwritten_ends.pop(job_id))

    def _saved(self, job: Job, now: Now) -> bool:
        """The running ``job`` written with the ranks it has left; False if the store could not (tried again)."""
        try:
            try:
                self._store.save(job)
            except RecordRefused as refused:  # this cause comes before the rest
                self.decide_end(job, JobState.FAILED, self._refused(job, refused), now, overriding=True)
                self._store.save(job)
        except StoreWriteError as error:
            delay = self._retry.failed(now.monotonic)
            log.error("the job store cannot write the rank ends of job %d (%s): their nodes keep them, tried "
                      "again in %.1f s", job.job_id, error, delay)
            return False
        return True

    @staticmethod
    def _refused(job: Job, refused: RecordRefused) -> str:
        """The store cannot hold ``job``'s record as it is: its measures (what its tasks gave) are dropped, and
        the reason it fails; the writes of every other job go on in their order."""
        log.error("the job store cannot hold job %d's record (%s): it ends failed, its measures dropped",
                  job.job_id, refused)
        job.measures_dropped()
        return f"its record could not be stored: {refused}"
