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

import logging
import secrets
from collections import deque

from gangsched.master.accounts import Account
from gangsched.master.barriers import NoFreePort
from gangsched.master.dependencies import dependencies, named
from gangsched.master.jobs import Job, Migration
from gangsched.master.placement import (
    Rendezvous,
    describe_shape,
    launches,
    processors_of,
    where,
)
from gangsched.master.scheduling import PolicyJob, Processor
from gangsched.master.state import CoreState
from gangsched.master.stats import Stopwatch
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.protocol.messages import CheckpointTask, KillTask
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class JobLifecycle(CoreState):
    def _settle(self) -> None:
        """After the events of one message or one tick: let the policy decide if one of them asks for it."""
        if not self._dirty:
            return
        now = self._clock.monotonic()
        while self._dirty:
            self._dirty = False
            with Stopwatch(self._decision_time):
                changes = self._scheduler.schedule(now)
            self._wake_at = changes.wake_at
            for job_id, nodes in changes.starts.items():
                self._start(self._jobs[job_id], nodes)
            for job_id, nodes in changes.moves.items():
                self._migrate(self._jobs[job_id], nodes, now)
        self._explain_waiting()

    def _enqueue(self, job: Job) -> None:
        """A pending job goes to the policy once the jobs it depends on allow; it is cancelled if they never will."""
        waiting, never, _ = dependencies(job.spec, self._state_of)
        self._dependent.pop(job.job_id, None)
        if never is not None:
            job.reason = f"DependencyNeverSatisfied: {never}"
            self._close(job, JobState.CANCELLED)
        elif waiting:
            self._dependent[job.job_id] = job
            job.reason = f"Dependency: waits for {','.join(map(str, waiting))}"
        else:
            job.reason = ""
            self._scheduler.submit(self._policy_job(job), self._clock.monotonic())
            self._dirty = True

    def _state_of(self, job_id: int) -> JobState | None:
        job = self._jobs.get(job_id) or self._store.get(job_id)
        return None if job is None else job.state

    def _explain_waiting(self) -> None:
        waiting = sorted((job for job in self._jobs.values()
                          if job.state is JobState.PENDING and job.job_id not in self._dependent),
                         key=lambda job: job.job_id)
        up = len(self._scheduler.columns)
        first = True
        for job in waiting:
            if self._scheduler.is_held(job.job_id):
                job.reason = f"needs {describe_shape(job.spec)}, {up} processors up"
                if self._clock.monotonic() < self._rejoin_until:
                    job.reason += " (nodes rejoining after a master restart)"
            elif not job.reason.startswith("requeued"):
                job.reason = "Resources" if first else "Priority"
                first = False

    def _start(self, job: Job, processors: list[Processor]) -> None:
        job.state = JobState.RUNNING
        job.start_time = self._clock.time()
        job.reason = ""
        if self._launch(job, processors, restore=False):
            log.info("job %d starts on %s", job.job_id, where(processors))

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
            self._close(job, JobState.FAILED)
            self._dirty = True
            return False
        job.node_names = [processor.node for processor in processors]
        job.processors = [processor.number for processor in processors]
        job.live_ranks = set(range(len(processors)))
        job.barrier_port = port
        job.rendezvous_port = None if rendezvous is None else rendezvous[1]
        job.fences = {}
        self._store.save(job)
        # MPICH names its shared memory after the key-value space, and a killed job leaves its
        # segments behind: a name never used before keeps a later job from opening them
        kvsname = f"gang-{job.job_id}-{secrets.token_hex(6)}"
        meet = Rendezvous(address, bind, None if rendezvous is None else rendezvous[0])
        for node_name, launch in launches(job, processors, meet, kvsname, self.settings.io_addr,
                                          self.settings.checkpoint_dir, restore):
            node = self._nodes.get(node_name)
            self._launching[(job.job_id, launch.task.rank)] = (node.incarnation if node else "", launch)
            self.outbox.append((node_name, launch))
        return True

    def _migrate(self, job: Job, processors: list[Processor], now: float) -> None:
        if job.migration is not None and not job.migration.restarted:  # moved again before it left
            job.migration.target = processors
            return
        log.info("job %d migrates from %s to %s", job.job_id, where(processors_of(job)), where(processors))
        job.migration = Migration(target=processors, asked=now)
        for node in sorted({job.node_names[rank] for rank in job.live_ranks}):
            self.outbox.append((node, CheckpointTask(job_id=job.job_id)))

    def _restart(self, job: Job, migration: Migration) -> None:
        migration.saved = job.barriers
        if self._launch(job, migration.target, restore=True):
            log.info("job %d restarts on %s from barrier %d", job.job_id, where(migration.target), job.barriers)

    def _migrated(self, job: Job, progress: int) -> None:
        """Rank 0 reported ``progress``: past the checkpoint, the migration is over and its cost known."""
        migration = job.migration
        if migration is None or migration.saved is None or progress <= migration.saved:
            return
        cost = self._clock.monotonic() - migration.asked
        job.migration = None
        job.migration_s.append(cost)
        self._migration_costs.observe(cost)
        self._scheduler.set_migration_cost(self._migration_costs.mean())
        log.info("job %d migrated in %.3f s", job.job_id, cost)

    def _decide_end(self, job: Job, state: JobState, reason: str) -> None:
        """The first cause decides how a running job ends: it leaves the policy, its other tasks are killed."""
        if job.ending is not None:
            return
        job.ending, job.reason = state, reason
        job.migration = None
        log.info("job %d ends as %s: %s", job.job_id, state, reason)
        self._scheduler.finish(job.job_id, self._clock.monotonic())
        self._dirty = True
        for node in sorted({job.node_names[rank] for rank in job.live_ranks}):
            self.outbox.append((node, KillTask(job_id=job.job_id, reason=reason)))

    def _ranks_gone(
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
            self._decide_end(job, *ending)
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
            self._close(job, job.ending or JobState.COMPLETED)

    def _requeue(self, job: Job) -> None:
        job.state, job.ending = JobState.PENDING, None
        job.requeues += 1
        job.node_names, job.processors, job.start_time = [], [], None
        job.barrier_port, job.rendezvous_port = None, None
        job.util_pct, job.quantum_utils, job.ran_s = None, {}, 0.0
        job.barriers, job.progress_history = 0, deque(maxlen=job.progress_history.maxlen)
        job.predictor = self._predictor()
        job.reason = f"requeued: {job.reason}"
        self._store.save(job)
        self._scheduler.submit(self._policy_job(job), self._clock.monotonic())
        self._dirty = True

    def _close(self, job: Job, state: JobState) -> None:
        job.state = state
        job.end_time = self._clock.time()
        if state is JobState.COMPLETED:
            job.exit_code = 0
        self._store.save(job)
        del self._jobs[job.job_id]
        if job.ran_s:
            account = self._account(job.spec.user)
            account.used_node_s += job.ran_s * job.spec.tasks
            self._store.save_account(account)
        log.info("job %d %s", job.job_id, state)
        for dependent in [each for each in self._dependent.values() if job.job_id in named(each.spec)]:
            self._enqueue(dependent)

    def _policy_job(self, job: Job) -> PolicyJob:
        spec = job.spec
        return PolicyJob(
            job_id=job.job_id,
            submit=self._monotonic(job.submit_time),
            procs=spec.tasks,
            nodes=spec.nodes,
            tasks_per_node=spec.tasks_per_node,
            estimate=self._time_limit(job),
            user_priority=spec.priority,
            political_priority=self._account(spec.user).priority_for_policy,
            migratable=spec.migratable and self.settings.checkpoint_dir is not None,
        )

    def _predictor(self) -> UtilizationPredictor:
        return UtilizationPredictor(self.settings.sharp_change or None)

    def _monotonic(self, unix_time: float) -> float:
        return self._clock.monotonic() - (self._clock.time() - unix_time)

    def _time_limit(self, job: Job) -> float:
        """The job's estimate, which is also its time limit."""
        return job.spec.estimate_s or self.settings.default_estimate_s

    def _account(self, user: str) -> Account:
        return self._accounts.setdefault(user, Account(user))
