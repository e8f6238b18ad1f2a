"""A job's life in the master: scheduling events, launches, migrations and endings.

A job: PENDING -> RUNNING (placed by the policy, its tasks launched) -> a
final state once every rank has exited. The final state is decided by the
first thing that goes wrong (``Job.ending``): a rank that fails, a cancel, the
time limit (TIMEOUT: the quanta it ran in add up to its estimate), a lost node
(NODE_FAIL, or back to PENDING if the user asked for requeue). A job leaves
the policy as soon as its end is decided.

A migration: the job's tasks checkpoint at their next barrier
(``CheckpointTask``), exit with CHECKPOINTED and start again on their new
nodes from the saved state; the time from the request until rank 0 passes a
barrier beyond the saved ones is the measured cost, fed back to the policy as
its C.
"""

import dataclasses
import logging
import secrets
import sqlite3
from collections import deque

from gangsched.master.accounts import Account
from gangsched.master.barriers import BarrierEndpoints, NoFreePort
from gangsched.master.clock import Clock
from gangsched.master.closing import Close, StoreRetry
from gangsched.master.dependencies import dependencies, named
from gangsched.master.job_record import Job, Migration
from gangsched.master.nodes import NodeRegistry
from gangsched.master.placement import (
    Rendezvous,
    describe_shape,
    memory_request,
    launches,
    processors_of,
    where,
)
from gangsched.master.scheduling import LiveScheduler, PolicyJob, Processor
from gangsched.master.settings import MasterSettings
from gangsched.master.stats import MIGRATION_BOUNDS_S, STEP_BOUNDS_S, Stopwatch, Timings
from gangsched.master.store import JobStore
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.protocol.messages import CheckpointTask, KillTask, LaunchTask, Message
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class JobLifecycle:
    """The jobs the master holds (pending and running), the policy's decisions over them, and each
    one's way to its end; ``outbox`` takes the orders for the nodes."""

    def __init__(self, settings: MasterSettings, store: JobStore, clock: Clock, nodes: NodeRegistry,
                 scheduler: LiveScheduler, outbox: deque[tuple[str, Message]]) -> None:
        self._settings = settings
        self._store = store
        self._clock = clock
        self._nodes = nodes
        self._scheduler = scheduler
        self._outbox = outbox
        self.jobs: dict[int, Job] = {}  # pending and running only
        self._dependent: dict[int, Job] = {}  # pending, held back from the policy by the jobs they depend on
        # launches no hello, report or exit has shown to arrive yet, with the incarnation of the node
        # daemon they went to: a repeated hello of that daemon may have crossed them on the way
        self._launching: dict[tuple[int, int], tuple[str, LaunchTask]] = {}
        self._unadopted: dict[int, Job] = {}  # running before a restart, until their nodes say hello
        self._barriers = BarrierEndpoints()
        self._dirty = False  # a scheduling event happened: the policy must decide again
        self._wake_at: float | None = None
        self._last_tick: float | None = None
        self.migration_costs = Timings(MIGRATION_BOUNDS_S)
        self.decision_time = Timings(STEP_BOUNDS_S)  # of each scheduling event's decisions
        self.accounts = {account.user: account for account in store.accounts()}
        self.rejoin_until = clock.monotonic()
        self._closing: dict[int, Close] = {}  # ended jobs whose end the store has not taken yet
        self.store_retry = StoreRetry(settings.quantum_ms / 1000)

    def restore(self) -> None:
        """Take back the jobs of a previous run; running ones wait for their nodes' hello."""
        now = self._clock.monotonic()
        # a master that starts on a store of an earlier run: its nodes have rejoin_s to come back
        self.rejoin_until = now + self._settings.rejoin_s if self._store.next_job_id() > 1 else now
        for job in self._store.active():
            job.predictor = self.predictor()
            self.jobs[job.job_id] = job
            if job.state is not JobState.RUNNING:
                self.enqueue(job)
                continue
            job.live_ranks = set(range(len(job.node_names)))
            self._unadopted[job.job_id] = job
            for node in job.node_names:
                self._nodes.expect(node, now)
            for port in (job.barrier_port, job.rendezvous_port):
                if port is not None:
                    self._barriers.reserve(job.node_names[0], port)
        if self.jobs:
            log.info("recovered %d jobs from the store", len(self.jobs))

    def event(self) -> None:
        """A scheduling event happened (an arrival, a departure, a node up or lost): the policy decides
        again at the next ``settle``."""
        self._dirty = True

    def quantum_ended(self, ran: set[int], now: float) -> None:
        """Charge the jobs the last switch ran with the quantum that ended; end those past their limit;
        wake the policy if it asked to be woken by now.

        Only a job that ran can have passed its limit since the last boundary.
        """
        elapsed = 0.0 if self._last_tick is None else now - self._last_tick
        self._last_tick = now
        for job_id in ran:
            job = self.jobs.get(job_id)
            if job is None or job.state is not JobState.RUNNING:
                continue
            job.ran_s += elapsed
            limit = self.time_limit(job)
            if job.ending is None and job.ran_s > limit + self._settings.over_time_s:
                self.decide_end(job, JobState.TIMEOUT, f"ran {job.ran_s:.1f} s, its time limit is {limit:g} s")
        if self._wake_at is not None and now >= self._wake_at:
            self._dirty = True

    def arrived(self, job_id: int, rank: int) -> None:
        """A hello, report or exit showed the task's launch arrived."""
        self._launching.pop((job_id, rank), None)

    def launch_in_flight(self, job_id: int, rank: int, incarnation: str) -> LaunchTask | None:
        """The launch of a task on its way to the node daemon ``incarnation``, if one is."""
        in_flight = self._launching.get((job_id, rank))
        return in_flight[1] if in_flight is not None and in_flight[0] == incarnation else None

    def adopt(self, up: set[str]) -> list[Job]:
        """The jobs restored after a restart whose nodes are all ``up`` again: no longer unadopted."""
        adopted = [job for job in self._unadopted.values() if set(job.node_names) <= up]
        for job in adopted:
            del self._unadopted[job.job_id]
        return adopted

    def withdraw(self, job: Job, reason: str) -> None:
        """A pending job leaves the queue for good (cancelled)."""
        self._scheduler.withdraw(job.job_id, self._clock.monotonic())
        self._dependent.pop(job.job_id, None)
        job.reason = reason
        self.close(job, JobState.CANCELLED)
        self._dirty = True

    def settle(self) -> None:
        """After the events of one message or one tick: let the policy decide if one of them asks for it."""
        if not self._dirty:
            return
        now = self._clock.monotonic()
        while self._dirty:
            self._dirty = False
            with Stopwatch(self.decision_time):
                changes = self._scheduler.schedule(now)
            self._wake_at = changes.wake_at
            for job_id, nodes in changes.starts.items():
                self._start(self.jobs[job_id], nodes)
            for job_id, nodes in changes.moves.items():
                self._migrate(self.jobs[job_id], nodes, now)
        self._explain_waiting()

    def enqueue(self, job: Job) -> None:
        """A pending job goes to the policy once the jobs it depends on allow; it is cancelled if they never will."""
        waiting, never, _ = dependencies(job.spec, self.state_of)
        self._dependent.pop(job.job_id, None)
        if never is not None:
            job.reason = f"DependencyNeverSatisfied: {never}"
            self.close(job, JobState.CANCELLED)
        elif waiting:
            self._dependent[job.job_id] = job
            job.reason = f"Dependency: waits for {','.join(map(str, waiting))}"
        else:
            job.reason = ""
            self._scheduler.submit(self.policy_job(job), self._clock.monotonic())
            self._dirty = True

    def state_of(self, job_id: int) -> JobState | None:
        job = self.jobs.get(job_id) or self._store.get(job_id)
        return None if job is None else job.state

    def _explain_waiting(self) -> None:
        waiting = sorted((job for job in self.jobs.values()
                          if job.state is JobState.PENDING and job.job_id not in self._dependent),
                         key=lambda job: job.job_id)
        up = len(self._scheduler.columns)
        first = True
        memory = self._scheduler.memory_room() if waiting else None
        for job in waiting:
            if self._scheduler.is_held(job.job_id):
                job.reason = f"needs {describe_shape(job.spec)}, {up} processors up"
                if self._clock.monotonic() < self.rejoin_until:
                    job.reason += " (nodes rejoining after a master restart)"
            elif not job.reason.startswith(("requeued", "start postponed")):
                if memory is not None and not memory(self.policy_job(job)):
                    job.reason = "Resources: memory"  # Slurm's word, and which resource
                else:
                    job.reason = "Resources" if first else "Priority"
                first = False

    def _start(self, job: Job, processors: list[Processor]) -> None:
        job.state = JobState.RUNNING
        job.start_time = self._clock.time()
        job.reason = ""
        if self._launch(job, processors, restore=False):
            log.info("job %d starts on %s", job.job_id, where(processors))

    def _postpone(self, job: Job, first: str, ports: list[int | None], error: sqlite3.Error) -> None:
        """The store cannot write the job's start: the start does not happen (memory follows the store),
        and the job waits out of the policy until the store is tried again (``retry_store``)."""
        now = self._clock.monotonic()
        for port in ports:
            self._barriers.release(first, port)
        delay = self.store_retry.failed(now)
        log.error("the job store cannot write job %d's start (%s): it waits, tried again in %.1f s",
                  job.job_id, error, delay)
        job.state, job.start_time, job.node_names, job.processors, job.live_ranks = \
            JobState.PENDING, None, [], [], set()
        job.barrier_port = job.rendezvous_port = None
        job.reason = "start postponed: the job store cannot write"
        self._scheduler.finish(job.job_id, now)
        self.store_retry.postponed.append(job.job_id)
        self._dirty = True  # the policy's layout without it; it is not in the policy, so it is not placed again

    def retry_store(self) -> None:
        """The store is due to be tried again: the closes that wait, and the starts it could not write
        (placed again: a start that fails again sets the next try)."""
        self.write_closes()
        if not self._closing:
            self.store_retry.succeeded()  # nothing waits for the store now
        postponed, self.store_retry.postponed = self.store_retry.postponed, []
        now = self._clock.monotonic()
        for job_id in postponed:
            job = self.jobs.get(job_id)
            if job is not None and job.state is JobState.PENDING:  # not cancelled meanwhile
                job.reason = ""  # it waits as any other now
                self._scheduler.submit(self.policy_job(job), now)
        self._dirty = True

    def _launch(self, job: Job, processors: list[Processor], restore: bool) -> bool:
        """Send the job's tasks to ``processors``; on failure the job fails, with the reason."""
        first = processors[0].node
        rank0 = self._nodes.get(first)
        try:
            if rank0 is None or rank0.peer is None:
                raise NoFreePort(f"node {first} has not said where tasks may bind")
            address, bind, port = self._barriers.allocate(job.job_id, first, rank0.peer)
            try:
                rendezvous = self._barriers.rendezvous(first, rank0.peer)
            except NoFreePort:
                self._barriers.release(first, port)
                raise
        except NoFreePort as error:
            job.node_names, job.processors, job.live_ranks = [], [], set()
            job.reason = f"could not start: {error}"
            self._scheduler.finish(job.job_id, self._clock.monotonic())
            self.close(job, JobState.FAILED)
            self._dirty = True
            return False
        job.node_names = [processor.node for processor in processors]
        job.processors = [processor.number for processor in processors]
        job.live_ranks = set(range(len(processors)))
        job.barrier_port = port
        job.rendezvous_port = None if rendezvous is None else rendezvous[1]
        job.fences = {}
        try:
            self._store.save(job)
        except sqlite3.Error as error:
            if restore:
                raise
            self._postpone(job, first, [port, job.rendezvous_port], error)
            return False
        # MPICH names its shared memory after the key-value space, and a killed job leaves its
        # segments behind: a name never used before keeps a later job from opening them
        kvsname = f"gang-{job.job_id}-{secrets.token_hex(6)}"
        meet = Rendezvous(address, bind, None if rendezvous is None else rendezvous[0])
        for node_name, launch in launches(job, processors, meet, kvsname, self._settings.io_addr,
                                          self._settings.checkpoint_dir, restore):
            node = self._nodes.get(node_name)
            self._launching[(job.job_id, launch.task.rank)] = (node.incarnation if node else "", launch)
            self._outbox.append((node_name, launch))
        return True

    def _migrate(self, job: Job, processors: list[Processor], now: float) -> None:
        if job.migration is not None and not job.migration.restarted:  # moved again before it left
            job.migration.target = processors
            return
        log.info("job %d migrates from %s to %s", job.job_id, where(processors_of(job)), where(processors))
        job.migration = Migration(target=processors, asked=now)
        for node in sorted({job.node_names[rank] for rank in job.live_ranks}):
            self._outbox.append((node, CheckpointTask(job_id=job.job_id)))

    def _restart(self, job: Job, migration: Migration) -> None:
        migration.saved = job.barriers
        if self._launch(job, migration.target, restore=True):
            log.info("job %d restarts on %s from barrier %d", job.job_id, where(migration.target), job.barriers)

    def migrated(self, job: Job, progress: int) -> None:
        """Rank 0 reported ``progress``: past the checkpoint, the migration is over and its cost known."""
        migration = job.migration
        if migration is None or migration.saved is None or progress <= migration.saved:
            return
        cost = self._clock.monotonic() - migration.asked
        job.migration = None
        job.migration_s.append(cost)
        self.migration_costs.observe(cost)
        self._scheduler.set_migration_cost(self.migration_costs.mean())
        log.info("job %d migrated in %.3f s", job.job_id, cost)

    def decide_end(self, job: Job, state: JobState, reason: str) -> None:
        """The first cause decides how a running job ends: it leaves the policy, its other tasks are killed."""
        if job.ending is not None:
            return
        job.ending, job.reason = state, reason
        job.migration = None
        log.info("job %d ends as %s: %s", job.job_id, state, reason)
        self._scheduler.finish(job.job_id, self._clock.monotonic())
        self._dirty = True
        for node in sorted({job.node_names[rank] for rank in job.live_ranks}):
            self._outbox.append((node, KillTask(job_id=job.job_id, reason=reason)))

    def ranks_gone(
        self,
        job: Job,
        ranks: set[int],
        ending: tuple[JobState, str] | None,
        exit_code: int | None = None,
    ) -> None:
        """Tasks of ``job`` exited or were lost; ``ending`` says if that ends the job."""
        job.live_ranks -= ranks
        for rank in ranks:
            self._launching.pop((job.job_id, rank), None)
        if ending is not None and job.ending is None:
            job.exit_code = exit_code
            self.decide_end(job, *ending)
        if job.live_ranks:
            return
        self._unadopted.pop(job.job_id, None)
        self._barriers.release(job.node_names[0], job.barrier_port)
        self._barriers.release(job.node_names[0], job.rendezvous_port)
        migration = job.migration
        if migration and not migration.restarted and len(migration.checkpointed) == len(job.node_names):
            self._restart(job, migration)
            return
        if job.ending is None:  # every rank ended well: the job is done
            self._scheduler.finish(job.job_id, self._clock.monotonic())
            self._dirty = True
        if job.ending is JobState.PENDING:
            self._requeue(job)
        else:
            self.close(job, job.ending or JobState.COMPLETED)

    def _requeue(self, job: Job) -> None:
        """The job goes back to the queue once the store has it so (as a close does: master/closing.py)."""
        self._closing[job.job_id] = Close(JobState.PENDING, self._clock.time())
        self.write_closes()

    def _requeued(self, job: Job) -> Job:
        """``job`` as it goes back to the queue: no nodes, nothing measured, one more requeue."""
        return dataclasses.replace(
            job, state=JobState.PENDING, ending=None, requeues=job.requeues + 1, node_names=[], processors=[],
            start_time=None, barrier_port=None, rendezvous_port=None, util_pct=None, quantum_utils={}, ran_s=0.0,
            barriers=0, progress_history=deque(maxlen=job.progress_history.maxlen), predictor=self.predictor(),
            reason=f"requeued: {job.reason}", live_ranks=set(), fences={})

    def close(self, job: Job, state: JobState) -> None:
        """The job ended ``state``: it is closed once the store has its end (master/closing.py)."""
        self._closing[job.job_id] = Close(state, self._clock.time())
        job.ending = job.ending or state  # nothing ends it again meanwhile
        self.write_closes()

    def write_closes(self) -> None:
        """Write the closes and requeues that wait, in the order the jobs ended; each one the store takes
        takes effect: a closed job leaves, its user's use counts, its dependents are released; a requeued
        one goes back to the policy."""
        for job_id, close in list(self._closing.items()):
            job = self.jobs[job_id]
            account = None
            if close.state is JobState.PENDING:
                written = self._requeued(job)
            else:
                written = dataclasses.replace(job, state=close.state, end_time=close.end_time,
                                              exit_code=0 if close.state is JobState.COMPLETED else job.exit_code)
                if job.ran_s:
                    used = self.account(job.spec.user)
                    account = dataclasses.replace(used, used_node_s=used.used_node_s + job.ran_s * job.spec.tasks)
            try:
                self._store.closed(written, account)
            except sqlite3.Error as error:
                delay = self.store_retry.failed(self._clock.monotonic())
                log.error("the job store cannot write job %d's %s (%s): %d wait, tried again in %.1f s", job_id,
                          "requeue" if close.state is JobState.PENDING else "end", error, len(self._closing), delay)
                return
            if not self.store_retry.postponed:  # else the postponed starts are due at the next try
                self.store_retry.succeeded()
            del self._closing[job_id]
            self._dirty = True
            if close.state is JobState.PENDING:
                self.jobs[job_id] = written
                self._scheduler.submit(self.policy_job(written), self._clock.monotonic())
                continue
            del self.jobs[job_id]
            job.state, job.end_time, job.exit_code = written.state, written.end_time, written.exit_code
            if account is not None:
                self.accounts[account.user] = account
            log.info("job %d %s", job_id, close.state)
            for dependent in [each for each in self._dependent.values() if job_id in named(each.spec)]:
                self.enqueue(dependent)

    def policy_job(self, job: Job) -> PolicyJob:
        spec = job.spec
        return PolicyJob(
            job_id=job.job_id,
            submit=self.monotonic(job.submit_time),
            procs=spec.tasks,
            nodes=spec.nodes,
            tasks_per_node=spec.tasks_per_node,
            estimate=self.time_limit(job),
            user_priority=spec.priority,
            political_priority=self.account(spec.user).priority_for_policy,
            migratable=spec.migratable and self._settings.checkpoint_dir is not None,
            memory=memory_request(spec),
        )

    def predictor(self) -> UtilizationPredictor:
        return UtilizationPredictor(self._settings.sharp_change or None)

    def monotonic(self, unix_time: float) -> float:
        return self._clock.monotonic() - (self._clock.time() - unix_time)

    def time_limit(self, job: Job) -> float:
        """The job's estimate, which is also its time limit."""
        return job.spec.estimate_s or self._settings.default_estimate_s

    def account(self, user: str) -> Account:
        return self.accounts.setdefault(user, Account(user))
