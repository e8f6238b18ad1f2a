"""The master's state and how it reacts to each event, without sockets.

Every public method is one event (a message arrived, a quantum ended) and
returns the reply for the sender, if any; messages for nodes are appended to
``outbox`` for the daemon to send. The clock is passed in, so tests drive this
class without real time.

The decisions are the batch policy's, the same code the simulator runs
(master/scheduling.py puts it in node names): at each scheduling event (an
arrival, a departure, a node up or lost, a time the policy asked to be woken
at) it says which jobs start and which migrate; at each quantum boundary the
quantum planner chooses which of its rows run.

A job's life: PENDING -> RUNNING (placed by the policy, its tasks launched)
-> a final state once every rank has exited. The final state is decided by
the first thing that goes wrong (``Job.ending``): a rank that fails, a cancel,
the time limit (TIMEOUT: the quanta it ran in add up to its estimate), a lost
node (NODE_FAIL, or back to PENDING if the user asked for requeue). A job
leaves the policy as soon as its end is decided.

A migration: the job's tasks checkpoint at their next barrier
(``CheckpointTask``), exit with CHECKPOINTED and start again on their new
nodes from the saved state; the time from the request until rank 0 passes a
barrier beyond the saved ones is the measured cost, fed back to the policy as
its C.
"""

import logging
import secrets
import statistics
from collections import deque
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Protocol

from gangsched.master.accounts import Account
from gangsched.master.barriers import BarrierEndpoints, NoFreePort
from gangsched.master.jobs import Job, Migration
from gangsched.master.nodes import Node, NodeRegistry
from gangsched.master.scheduling import LiveScheduler, PolicyJob, Processor
from gangsched.master.settings import MasterSettings
from gangsched.master.store import JobStore
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.policy.quantum import PlanInput, Selection, planner
from gangsched.policy.topology import Topology
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.exits import CHECKPOINTED
from gangsched.protocol.messages import (
    Cancel,
    Cancelled,
    CheckpointTask,
    ErrorReply,
    ExitAck,
    Heartbeat,
    JOBS_PER_REPLY,
    JobList,
    JobQuery,
    JobSpec,
    JobState,
    KillTask,
    LaunchTask,
    MatrixView,
    Message,
    NodeHello,
    NodeList,
    NodeWelcome,
    PmiFence,
    PmiFenceDone,
    QuantumReport,
    SetUser,
    SlotSwitch,
    Submit,
    Submitted,
    SwitchStats,
    TaskExit,
    TaskSpec,
    UserList,
)

log = logging.getLogger("gangsched.master")

_FINISHED_SHOWN = 200
_SWITCHES_KEPT = 100_000


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def monotonic_ns(self) -> int: ...
    def time(self) -> float: ...
    def process_time_ns(self) -> int: ...


class NodeEndpoints(NamedTuple):
    """Where the nodes connect for the switches and the reports, as the master bound them."""

    switch: str
    report: str


@dataclass
class _Switch:
    sent_ns: int
    expected: int
    reported: int = 0
    last_applied_ns: int = 0


class MasterCore:
    def __init__(self, settings: MasterSettings, endpoints: NodeEndpoints, store: JobStore, clock: Clock) -> None:
        self.settings = settings
        self._endpoints = endpoints
        self.outbox: list[tuple[str, Message]] = []
        self._store = store
        self._clock = clock
        self._jobs: dict[int, Job] = {}  # pending and running only
        self._nodes = NodeRegistry()
        self._barriers = BarrierEndpoints()
        self._scheduler = LiveScheduler(settings.choice(), settings.longest_estimate_s)
        self._planner = planner(settings.pairing_used(), settings.matching, settings.coordination)
        self._dirty = False  # a scheduling event happened: the policy must decide again
        self._wake_at: float | None = None
        # launches no hello, report or exit has shown to arrive yet, with the pid of the node daemon
        # they went to: a repeated hello of that daemon may have crossed them on the way
        self._launching: dict[tuple[int, int], tuple[int, LaunchTask]] = {}
        self._unadopted: dict[int, Job] = {}  # running before a restart, until their nodes say hello
        self._quantum = 0
        self._selection = Selection(())
        self._ran: set[int] = set()  # the jobs the last switch ran
        self._last_tick: float | None = None
        self._busy_quanta = 0
        self._partner_quanta: list[int] = []
        self._switches: dict[int, _Switch] = {}
        self._switch_order: deque[int] = deque()
        self._migration_costs: list[float] = []
        self._accounts = {account.user: account for account in store.accounts()}
        self._restore()

    # ------------------------------------------------------------ clients

    def submit(self, message: Submit) -> Submitted | ErrorReply:
        spec = message.spec
        if message.token is not None:
            earlier = self._store.job_of_token(spec.user, message.token)
            if earlier is not None:
                return Submitted(job_id=earlier)
        cluster = Topology.of(self._nodes.processors())
        # while the nodes of a restarted master come back, a job waits for them instead
        if self._clock.monotonic() >= self._rejoin_until and \
                not cluster.fits((1 << cluster.width) - 1, _Shape(spec.tasks, spec.nodes, spec.tasks_per_node)):
            reason = f"needs {_describe_shape(spec)}, " \
                f"the cluster has {cluster.width} processors on {len(cluster.node_columns)} nodes"
            return ErrorReply(code=ErrorCode.NEVER_FITS, reason=reason)
        job = Job(
            job_id=self._store.next_job_id(),
            spec=spec,
            state=JobState.PENDING,
            submit_time=self._clock.time(),
            predictor=self._predictor(),
        )
        self._jobs[job.job_id] = job
        self._store.submitted(job, message.token)
        log.info("job %d submitted by %s: %s, %d tasks", job.job_id, spec.user, spec.name, spec.tasks)
        self._scheduler.submit(self._policy_job(job), self._clock.monotonic())
        self._dirty = True
        self._settle()
        return Submitted(job_id=job.job_id)

    def cancel(self, message: Cancel) -> Cancelled | ErrorReply:
        job = self._jobs.get(message.job_id)
        if job is None:
            stored = self._store.get(message.job_id)
            if stored is None:
                return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no job {message.job_id}")
            return ErrorReply(
                code=ErrorCode.JOB_FINISHED, reason=f"job {message.job_id} is already {stored.state}"
            )
        if message.user not in (job.spec.user, "root"):
            return ErrorReply(
                code=ErrorCode.PERMISSION_DENIED,
                reason=f"job {job.job_id} belongs to {job.spec.user}, not {message.user}",
            )
        reason = f"cancelled by {message.user}"
        if job.state is JobState.PENDING:
            self._scheduler.withdraw(job.job_id, self._clock.monotonic())
            job.reason = reason
            self._close(job, JobState.CANCELLED)
            self._dirty = True
        else:
            self._decide_end(job, JobState.CANCELLED, reason)
        self._settle()
        return Cancelled(job_id=job.job_id, state=job.ending or job.state)

    def query_jobs(self, message: JobQuery) -> JobList:
        if message.job_ids is not None:
            found = (self._jobs.get(job_id) or self._store.get(job_id) for job_id in message.job_ids)
            jobs = [job for job in found if job is not None]
        else:
            jobs = list(self._jobs.values())
            if message.include_finished:
                jobs = self._store.finished(_FINISHED_SHOWN) + jobs
        page = sorted((job for job in jobs if job.job_id > message.after_id), key=lambda job: job.job_id)
        return JobList(jobs=[job.info() for job in page[:JOBS_PER_REPLY]], more=len(page) > JOBS_PER_REPLY)

    def query_nodes(self) -> NodeList:
        jobs_by_node: dict[str, list[int]] = {}
        for job in self._jobs.values():
            for node in sorted({job.node_names[rank] for rank in job.live_ranks}):
                jobs_by_node.setdefault(node, []).append(job.job_id)
        used: dict[str, int] = {}
        for row in self._selection.rows[:1]:  # the slot whose turn it is
            for processor in self._scheduler.rows[row] if row < len(self._scheduler.rows) else ():
                used[processor.node] = used.get(processor.node, 0) + 1
        return NodeList(nodes=self._nodes.info(jobs_by_node, used, self._clock.monotonic()))

    def query_matrix(self) -> MatrixView:
        columns = self._scheduler.columns
        name = self._scheduler.name
        return MatrixView(
            quantum=self._quantum,
            quantum_ms=self.settings.quantum_ms,
            policy=name if self._planner.name == "strict" else f"{name}/{self._planner.name}",
            nodes=[processor.node for processor in columns],
            processors=[processor.number for processor in columns],
            rows=[[row.get(processor) for processor in columns] for row in self._scheduler.rows],
            running=list(self._selection.rows),
            alternates=list(self._selection.alternates),
        )

    def set_user(self, message: SetUser) -> UserList | ErrorReply:
        """The administrator's word on a user: it counts for the jobs they submit from now on."""
        if message.admin != "root":
            return ErrorReply(code=ErrorCode.PERMISSION_DENIED,
                              reason=f"only root sets users' priorities and quotas, not {message.admin}")
        account = self._account(message.user)
        if message.political_priority is not None:
            account.political_priority = message.political_priority
        if message.quota_node_s is not None or message.clear_quota:
            account.quota_node_s = message.quota_node_s
        self._store.save_account(account)
        log.info("user %s: political priority %g, quota %s node-s", account.user, account.political_priority,
                 account.quota_node_s)
        return self.query_users()

    def query_users(self) -> UserList:
        return UserList(users=[self._accounts[user].info() for user in sorted(self._accounts)])

    def switch_stats(self, last: int) -> SwitchStats:
        complete = [
            switch.last_applied_ns - switch.sent_ns
            for switch in (self._switches[q] for q in self._switch_order)
            if switch.expected and switch.reported >= switch.expected
        ]
        return SwitchStats(
            latencies_ns=complete[-last:],
            master_cpu_ns=self._clock.process_time_ns(),
            quantum=self._quantum,
            busy_quanta=self._busy_quanta,
            partner_quanta=list(self._partner_quanta),
        )

    # ------------------------------------------------------------ nodes

    def hello(self, identity: bytes, hello: NodeHello) -> NodeWelcome:
        previous = self._nodes.get(hello.node)
        if previous is not None and previous.peer is not None:
            log.info("node %s registers again (pid %d)", hello.node, hello.pid)
        else:
            log.info("node %s registers: %.2f cpus, pid %d", hello.node, hello.cpus, hello.pid)
        self._nodes.register(hello, identity, self._clock.monotonic())
        for exit_ in hello.exits:
            self.outbox.append((hello.node, self.task_exit(exit_)))
        self._reconcile_tasks(hello)
        self._follow_nodes()
        self._settle()
        return NodeWelcome(
            node=hello.node,
            switch_endpoint=self._endpoints.switch,
            report_endpoint=self._endpoints.report,
            heartbeat_ms=self.settings.heartbeat_ms,
            quantum_ms=self.settings.quantum_ms,
        )

    def heartbeat(self, message: Heartbeat) -> ErrorReply | None:
        if self._nodes.seen(message.node, self._clock.monotonic()):
            return None
        return _say_hello(message.node)

    def task_exit(self, message: TaskExit) -> ExitAck:
        self._launching.pop((message.job_id, message.rank), None)
        job = self._jobs.get(message.job_id)
        if job is not None and message.rank in job.live_ranks:
            job.cpu_ns += message.cpu_ns
            if message.rank == 0:
                job.record_progress(self._clock.monotonic(), self._clock.time(), message.progress)
            ending = None
            migration = job.migration
            if migration and not migration.restarted and message.error is None and message.returncode == CHECKPOINTED:
                migration.checkpointed.add(message.rank)
            elif message.error is not None or message.returncode != 0:
                what = message.error or f"exited with {_describe(message.returncode)}"
                ending = (JobState.FAILED, f"rank {message.rank} on {message.node} {what}")
            self._ranks_gone(job, {message.rank}, ending, exit_code=message.returncode)
        self._settle()
        return ExitAck(job_id=message.job_id, rank=message.rank)

    def report(self, report: QuantumReport) -> ErrorReply | None:
        if not self._nodes.seen(report.node, self._clock.monotonic()):
            return _say_hello(report.node)
        switch = self._switches.get(report.quantum)
        if switch is not None:
            switch.reported += 1
            switch.last_applied_ns = max(switch.last_applied_ns, report.switch_applied_ns)
        node = self._nodes.get(report.node)
        share = node.cpus / node.processors if node else 1.0  # each task is measured against one processor
        now, wall = self._clock.monotonic(), self._clock.time()
        for sample in report.samples:
            self._launching.pop((sample.job_id, sample.rank), None)
            job = self._jobs.get(sample.job_id)
            if job is None or job.state is not JobState.RUNNING:
                continue
            job.cpu_ns += sample.cpu_ns
            if sample.runnable_ns > 0:
                job.add_utilization(report.quantum, 100.0 * sample.cpu_ns / (sample.runnable_ns * share))
            if sample.rank == 0:
                job.record_progress(now, wall, sample.progress)
                self._migrated(job, sample.progress)
        return None

    def pmi_fence(self, fence: PmiFence) -> ErrorReply | None:
        """A node's ranks of a job entered a PMI barrier: when every node of the job has, all get every put."""
        job = self._jobs.get(fence.job_id)
        if job is None or job.state is not JobState.RUNNING or fence.node not in job.node_names:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no running job {fence.job_id} on {fence.node}")
        entered = job.fences.setdefault(fence.epoch, {})
        entered[fence.node] = fence.kvs
        nodes = set(job.node_names)
        if set(entered) < nodes:
            return None
        merged = {key: value for kvs in entered.values() for key, value in kvs.items()}
        del job.fences[fence.epoch]
        for node in sorted(nodes):
            self.outbox.append((node, PmiFenceDone(job_id=job.job_id, epoch=fence.epoch, kvs=merged)))
        return None

    def node(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def node_unreachable(self, name: str) -> None:
        self._lose_node(name, f"node {name} became unreachable")
        self._settle()

    # ------------------------------------------------------------ time

    def tick(self) -> SlotSwitch:
        """A quantum boundary: drop silent nodes, enforce time limits, choose the rows, build the switch."""
        now = self._clock.monotonic()
        timeout = self.settings.heartbeat_ms * self.settings.heartbeat_misses / 1000
        for name in self._nodes.silent(now, timeout):
            self._lose_node(name, f"node {name} missed {self.settings.heartbeat_misses} heartbeats")
        rejoin = self.settings.rejoin_s
        for name in self._nodes.not_back(now, rejoin):
            self._lose_node(name, f"node {name} did not come back within {rejoin:g} s of a master restart")
        self._count_run_time(now)
        if self._wake_at is not None and now >= self._wake_at:
            self._dirty = True
        self._settle()
        self._quantum += 1
        running = [job for job in self._jobs.values() if job.state is JobState.RUNNING]
        scheduler = self._scheduler
        self._selection = self._planner.select(PlanInput(
            layout=scheduler.layout,
            predict=lambda: {job.job_id: job.predictor.predict() for job in running},
            exclusive_jobs={job.job_id for job in running if job.spec.exclusive},
            columns=(1 << len(scheduler.columns)) - 1,
            regroup=lambda predictions: scheduler.regroup(predictions, now),
        ))
        if self._selection.rows:
            self._busy_quanta += 1
        for partner in self._selection.rows[1:]:
            self._partner_quanta += [0] * (partner + 1 - len(self._partner_quanta))
            self._partner_quanta[partner] += 1
        run = self._runnable(self._selection)
        switch = SlotSwitch(quantum=self._quantum, sent_ns=self._clock.monotonic_ns(), run=run)
        self._remember_switch(switch, len(scheduler.nodes))
        return switch

    # ------------------------------------------------------------ internals

    def _restore(self) -> None:
        """Take back the jobs of a previous run; running ones wait for their nodes' hello."""
        now = self._clock.monotonic()
        # a master that starts on a store of an earlier run: its nodes have rejoin_s to come back
        self._rejoin_until = now + self.settings.rejoin_s if self._store.next_job_id() > 1 else now
        for job in self._store.active():
            job.predictor = self._predictor()
            self._jobs[job.job_id] = job
            if job.state is not JobState.RUNNING:
                self._scheduler.submit(self._policy_job(job), now)
                continue
            job.live_ranks = set(range(len(job.node_names)))
            self._unadopted[job.job_id] = job
            for node in job.node_names:
                self._nodes.expect(node, now)
            for port in (job.barrier_port, job.rendezvous_port):
                if port is not None:
                    self._barriers.reserve(job.node_names[0], port)
        if self._jobs:
            log.info("recovered %d jobs from the store", len(self._jobs))

    def _predictor(self) -> UtilizationPredictor:
        return UtilizationPredictor(self.settings.sharp_change or None)

    def _monotonic(self, unix_time: float) -> float:
        return self._clock.monotonic() - (self._clock.time() - unix_time)

    def _time_limit(self, job: Job) -> float:
        """The job's estimate, which is also its time limit."""
        return job.spec.estimate_s or self.settings.default_estimate_s

    def _account(self, user: str) -> Account:
        return self._accounts.setdefault(user, Account(user))

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

    def _follow_nodes(self) -> None:
        """Rebuild the policy when the nodes up changed; adopt restored jobs whose nodes are all back."""
        up = self._nodes.up()
        adopted = [job for job in self._unadopted.values() if set(job.node_names) <= set(up)]
        if up == self._scheduler.processor_counts() and not adopted:
            return
        self._scheduler.rebuild(up, self._clock.monotonic(), [
            (self._policy_job(job), _processors(job), self._monotonic(job.start_time or job.submit_time))
            for job in adopted
        ])
        for job in adopted:
            del self._unadopted[job.job_id]
        self._dirty = True

    def _reconcile_tasks(self, hello: NodeHello) -> None:
        reported = {(task.job_id, task.rank) for task in hello.tasks}
        expected = {
            (job.job_id, rank)
            for job in self._jobs.values()
            for rank in job.live_ranks
            if job.node_names[rank] == hello.node
        }
        for job_id, rank in sorted(reported - expected):
            log.warning("node %s runs job %d rank %d that is not the master's: killing it",
                        hello.node, job_id, rank)
            self.outbox.append((hello.node, KillTask(job_id=job_id, reason="orphaned task")))
        for key in reported:
            self._launching.pop(key, None)
        for job_id, rank in sorted(expected - reported):
            in_flight = self._launching.get((job_id, rank))
            if in_flight is not None and in_flight[0] == hello.pid:
                # the same daemon: the launch is on its way, or this hello left before it came;
                # sent again, it starts the task or is ignored as one that runs
                self.outbox.append((hello.node, in_flight[1]))
                continue
            job = self._jobs[job_id]
            reason = f"rank {rank} vanished from node {hello.node}"
            self._ranks_gone(job, {rank}, (_lost_state(job), reason))

    def _lose_node(self, name: str, reason: str) -> None:
        if not self._nodes.mark_down(name):
            return
        log.warning("%s: marked down", reason)
        for job in list(self._jobs.values()):
            ranks = {rank for rank in job.live_ranks if job.node_names[rank] == name}
            if ranks or name in self._scheduler.nodes_of(job.job_id):  # on it, or migrating to it
                self._ranks_gone(job, ranks, (_lost_state(job), reason))
        self._follow_nodes()

    def _settle(self) -> None:
        """After the events of one message or one tick: let the policy decide if one of them asks for it."""
        if not self._dirty:
            return
        now = self._clock.monotonic()
        while self._dirty:
            self._dirty = False
            changes = self._scheduler.schedule(now)
            self._wake_at = changes.wake_at
            for job_id, nodes in changes.starts.items():
                self._start(self._jobs[job_id], nodes)
            for job_id, nodes in changes.moves.items():
                self._migrate(self._jobs[job_id], nodes, now)
        self._explain_waiting()

    def _explain_waiting(self) -> None:
        waiting = sorted((job for job in self._jobs.values() if job.state is JobState.PENDING),
                         key=lambda job: job.job_id)
        up = len(self._scheduler.columns)
        first = True
        for job in waiting:
            if self._scheduler.is_held(job.job_id):
                job.reason = f"needs {_describe_shape(job.spec)}, {up} processors up"
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
            log.info("job %d starts on %s", job.job_id, _where(processors))

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
        block = _block(job.node_names)
        # MPICH names its shared memory after the key-value space, and a killed job leaves its
        # segments behind: a name never used before keeps a later job from opening them
        kvsname = f"gang-{job.job_id}-{secrets.token_hex(6)}"
        for rank, processor in enumerate(processors):
            task = TaskSpec(
                job_id=job.job_id,
                rank=rank,
                size=len(processors),
                user=job.spec.user,
                processor=processor.number,
                block=block,
                mpi=job.spec.mpi,
                kvsname=kvsname,
                rendezvous=None if rendezvous is None else rendezvous[0],
                argv=job.spec.argv,
                cwd=job.spec.cwd,
                env=job.spec.env,
                barrier_addr=address,
                barrier_bind=bind,
                io_addr=self.settings.io_addr,
                output=job.spec.output,
                checkpoint=self._checkpoint_path(job, rank),
                restore=restore,
            )
            launch = LaunchTask(task=task)
            node = self._nodes.get(processor.node)
            self._launching[(job.job_id, rank)] = (node.pid if node else 0, launch)
            self.outbox.append((processor.node, launch))
        return True

    def _checkpoint_path(self, job: Job, rank: int) -> str | None:
        folder = self.settings.checkpoint_dir
        if folder is None or not job.spec.migratable:
            return None
        # each user's checkpoints in a folder of theirs (the node makes it 0700), not readable by other jobs
        return str(Path(folder) / job.spec.user / f"job-{job.job_id}" / f"rank-{rank}")

    def _migrate(self, job: Job, processors: list[Processor], now: float) -> None:
        if job.migration is not None and not job.migration.restarted:  # moved again before it left
            job.migration.target = processors
            return
        log.info("job %d migrates from %s to %s", job.job_id, _where(_processors(job)), _where(processors))
        job.migration = Migration(target=processors, asked=now)
        for node in sorted({job.node_names[rank] for rank in job.live_ranks}):
            self.outbox.append((node, CheckpointTask(job_id=job.job_id)))

    def _restart(self, job: Job, migration: Migration) -> None:
        migration.saved = job.barriers
        if self._launch(job, migration.target, restore=True):
            log.info("job %d restarts on %s from barrier %d", job.job_id, _where(migration.target), job.barriers)

    def _migrated(self, job: Job, progress: int) -> None:
        """Rank 0 reported ``progress``: past the checkpoint, the migration is over and its cost known."""
        migration = job.migration
        if migration is None or migration.saved is None or progress <= migration.saved:
            return
        cost = self._clock.monotonic() - migration.asked
        job.migration = None
        job.migration_s.append(cost)
        self._migration_costs.append(cost)
        self._scheduler.set_migration_cost(statistics.fmean(self._migration_costs))
        log.info("job %d migrated in %.3f s", job.job_id, cost)

    def _count_run_time(self, now: float) -> None:
        """Charge the jobs of the last switch with the quantum that ended; kill those past their limit.

        Only a job that ran can have passed its limit since the last boundary.
        """
        elapsed = 0.0 if self._last_tick is None else now - self._last_tick
        self._last_tick = now
        for job_id in self._ran:
            job = self._jobs.get(job_id)
            if job is None or job.state is not JobState.RUNNING:
                continue
            job.ran_s += elapsed
            limit = self._time_limit(job)
            if job.ending is None and job.ran_s > limit + self.settings.over_time_s:
                self._decide_end(job, JobState.TIMEOUT, f"ran {job.ran_s:.1f} s, its time limit is {limit:g} s")

    def _runnable(self, selection: Selection) -> dict[str, list[int]]:
        """For every node up, the jobs whose tasks run in the coming quantum."""
        scheduler = self._scheduler
        run: dict[str, list[int]] = {name: [] for name in scheduler.nodes}
        for row in selection.rows:
            for processor, job_id in scheduler.rows[row].items():
                if job_id not in run[processor.node]:
                    run[processor.node].append(job_id)
        for job_id in selection.alternates:
            for name in sorted(scheduler.nodes_of(job_id)):
                run[name].append(job_id)
        self._ran = {job_id for jobs in run.values() for job_id in jobs}
        return run

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

    def _remember_switch(self, switch: SlotSwitch, expected: int) -> None:
        self._switches[switch.quantum] = _Switch(switch.sent_ns, expected)
        self._switch_order.append(switch.quantum)
        if len(self._switch_order) > _SWITCHES_KEPT:
            del self._switches[self._switch_order.popleft()]


def _processors(job: Job) -> list[Processor]:
    return [Processor(node, index) for node, index in zip(job.node_names, job.processors, strict=True)]


def _block(nodes: list[str]) -> list[int]:
    """Ranks per node, in the order of their first rank: the policy's columns keep each node's ranks together."""
    counts: dict[str, int] = {}
    for node in nodes:
        counts[node] = counts.get(node, 0) + 1
    if sum(1 for previous, node in zip(nodes, nodes[1:]) if previous != node) != len(counts) - 1:
        raise ValueError(f"the ranks of one node are not consecutive: {nodes}")
    return list(counts.values())


def _where(processors: list[Processor]) -> str:
    return ",".join(f"{processor.node}:{processor.number}" for processor in processors)


@dataclass
class _Shape:
    """A job's placement request as the topology reads it."""

    procs: int
    nodes: int | None
    tasks_per_node: int | None


def _describe_shape(spec: JobSpec) -> str:
    words = f"{spec.tasks} processors"
    if spec.nodes is not None:
        words += f" on {spec.nodes} nodes"
    if spec.tasks_per_node is not None:
        words += f", at most {spec.tasks_per_node} a node"
    return words


def _lost_state(job: Job) -> JobState:
    return JobState.PENDING if job.spec.requeue else JobState.NODE_FAIL


def _say_hello(node: str) -> ErrorReply:
    return ErrorReply(code=ErrorCode.UNKNOWN_NODE, reason=f"node {node} must register first")


def _describe(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"signal {-returncode}"
    return f"status {returncode}"
