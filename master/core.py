"""The master's state and how it reacts to each event, without sockets.

Every public method is one event (a message arrived, a quantum ended) and
returns the reply for the sender, if any; messages for nodes are appended to
``outbox`` for the daemon to send. The clock is passed in, so tests and the
simulator drive this class without real time.

A job's life: PENDING -> RUNNING (placed in the matrix, its tasks launched)
-> a final state once every rank has exited. The final state is decided by
the first thing that goes wrong (``Job.ending``): a rank that fails, a cancel,
a lost node (NODE_FAIL, or back to PENDING if the user asked for requeue).
"""

import logging
from collections import deque
from dataclasses import dataclass
from typing import Protocol

from gangsched.master.barriers import BarrierEndpoints, NoFreePort
from gangsched.master.jobs import Job
from gangsched.master.nodes import Node, NodeRegistry
from gangsched.master.store import JobStore
from gangsched.policy.gang import Placement, Request, never_fits, schedule
from gangsched.policy.matrix import Matrix
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.policy.quantum import Matching, PlanInput, Selection, planner
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import (
    Cancel,
    Cancelled,
    ErrorReply,
    ExitAck,
    Heartbeat,
    JobList,
    JobQuery,
    JobState,
    KillTask,
    LaunchTask,
    MatrixView,
    Message,
    NodeHello,
    NodeList,
    NodeWelcome,
    QuantumReport,
    SlotSwitch,
    Submit,
    Submitted,
    SwitchStats,
    TaskExit,
    TaskSpec,
)

log = logging.getLogger("gangsched.master")

_FINISHED_SHOWN = 200
_SWITCHES_KEPT = 100_000


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def monotonic_ns(self) -> int: ...
    def time(self) -> float: ...
    def process_time_ns(self) -> int: ...


@dataclass(frozen=True)
class MasterConfig:
    quantum_ms: int
    heartbeat_ms: int
    heartbeat_misses: int
    mpl: int
    switch_endpoint: str
    io_addr: str | None
    policy: str = "strict"  # strict | paired
    matching: Matching = "fair"
    sharp_change: float | None = 20.0  # points; None: no sharp-change detection


@dataclass
class _Switch:
    sent_ns: int
    expected: int
    reported: int = 0
    last_applied_ns: int = 0


class MasterCore:
    def __init__(self, config: MasterConfig, store: JobStore, clock: Clock) -> None:
        self.config = config
        self.outbox: list[tuple[str, Message]] = []
        self._store = store
        self._clock = clock
        self._jobs: dict[int, Job] = {}  # pending and running only
        self._nodes = NodeRegistry()
        self._matrix = Matrix()
        self._barriers = BarrierEndpoints()
        self._quantum = 0
        self._planner = planner(config.policy, config.matching)
        self._selection = Selection(())
        self._busy_quanta = 0
        self._partner_quanta: list[int] = []
        self._switches: dict[int, _Switch] = {}
        self._switch_order: deque[int] = deque()
        self._restore()

    # ------------------------------------------------------------ clients

    def submit(self, message: Submit) -> Submitted | ErrorReply:
        spec = message.spec
        refusal = never_fits(spec.nodes, self._nodes.count())
        if refusal:
            return ErrorReply(code=ErrorCode.NEVER_FITS, reason=refusal)
        job = Job(
            job_id=self._store.next_job_id(),
            spec=spec,
            state=JobState.PENDING,
            submit_time=self._clock.time(),
            predictor=self._predictor(),
        )
        self._jobs[job.job_id] = job
        self._store.save(job)
        log.info("job %d submitted by %s: %s on %d nodes", job.job_id, spec.user, spec.name, spec.nodes)
        self._reschedule()
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
            job.reason = reason
            self._close(job, JobState.CANCELLED)
        else:
            self._decide_end(job, JobState.CANCELLED, reason)
        return Cancelled(job_id=job.job_id, state=job.ending or job.state)

    def query_jobs(self, message: JobQuery) -> JobList:
        if message.job_ids is not None:
            found = (self._jobs.get(job_id) or self._store.get(job_id) for job_id in message.job_ids)
            jobs = [job for job in found if job is not None]
        else:
            jobs = list(self._jobs.values())
            if message.include_finished:
                jobs = self._store.finished(_FINISHED_SHOWN) + jobs
        return JobList(jobs=[job.info() for job in sorted(jobs, key=lambda job: job.job_id)])

    def query_nodes(self) -> NodeList:
        jobs_by_node: dict[str, list[int]] = {}
        for job in self._jobs.values():
            for rank in sorted(job.live_ranks):
                jobs_by_node.setdefault(job.node_names[rank], []).append(job.job_id)
        return NodeList(nodes=self._nodes.info(jobs_by_node, self._clock.monotonic()))

    def query_matrix(self) -> MatrixView:
        nodes = self._nodes.names()
        return MatrixView(
            quantum=self._quantum,
            quantum_ms=self.config.quantum_ms,
            policy=self._planner.name,
            nodes=nodes,
            rows=self._matrix.table(nodes),
            running=list(self._selection.rows),
            alternates=list(self._selection.alternates),
        )

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
        self._reschedule()
        return NodeWelcome(
            node=hello.node,
            switch_endpoint=self.config.switch_endpoint,
            heartbeat_ms=self.config.heartbeat_ms,
            quantum_ms=self.config.quantum_ms,
        )

    def heartbeat(self, message: Heartbeat) -> ErrorReply | None:
        if self._nodes.seen(message.node, self._clock.monotonic()):
            return None
        return _say_hello(message.node)

    def task_exit(self, message: TaskExit) -> ExitAck:
        job = self._jobs.get(message.job_id)
        if job is not None and message.rank in job.live_ranks:
            job.cpu_ns += message.cpu_ns
            if message.rank == 0:
                job.record_progress(self._clock.monotonic(), self._clock.time(), message.progress)
            failed = message.error is not None or message.returncode != 0
            ending = None
            if failed:
                what = message.error or f"exited with {_describe(message.returncode)}"
                ending = (JobState.FAILED, f"rank {message.rank} on {message.node} {what}")
            self._ranks_gone(job, {message.rank}, ending, exit_code=message.returncode)
        return ExitAck(job_id=message.job_id, rank=message.rank)

    def report(self, report: QuantumReport) -> ErrorReply | None:
        if not self._nodes.seen(report.node, self._clock.monotonic()):
            return _say_hello(report.node)
        switch = self._switches.get(report.quantum)
        if switch is not None:
            switch.reported += 1
            switch.last_applied_ns = max(switch.last_applied_ns, report.switch_applied_ns)
        node = self._nodes.get(report.node)
        cpus = node.cpus if node else 1.0
        now, wall = self._clock.monotonic(), self._clock.time()
        for sample in report.samples:
            job = self._jobs.get(sample.job_id)
            if job is None or job.state is not JobState.RUNNING:
                continue
            job.cpu_ns += sample.cpu_ns
            if sample.runnable_ns > 0:
                job.add_utilization(report.quantum, 100.0 * sample.cpu_ns / (sample.runnable_ns * cpus))
            if job.node_names and job.node_names[0] == report.node:
                job.record_progress(now, wall, sample.progress)
        return None

    def node(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def node_unreachable(self, name: str) -> None:
        self._lose_node(name, f"node {name} became unreachable")

    # ------------------------------------------------------------ time

    def tick(self) -> SlotSwitch:
        """A quantum boundary: drop silent nodes, choose the rows, build the switch."""
        timeout = self.config.heartbeat_ms * self.config.heartbeat_misses / 1000
        for name in self._nodes.expired(self._clock.monotonic(), timeout):
            self._lose_node(name, f"node {name} missed {self.config.heartbeat_misses} heartbeats")
        self._quantum += 1
        up = self._nodes.up()
        running = [job for job in self._jobs.values() if job.state is JobState.RUNNING]
        self._selection = self._planner.select(PlanInput(
            matrix=self._matrix,
            predictions={job.job_id: job.predictor.predict() for job in running},
            exclusive_jobs={job.job_id for job in running if job.spec.exclusive},
            nodes=up,
            mpl=self.config.mpl,
        ))
        if self._selection.rows:
            self._busy_quanta += 1
        for partner in self._selection.rows[1:]:
            self._partner_quanta += [0] * (partner + 1 - len(self._partner_quanta))
            self._partner_quanta[partner] += 1
        run = self._matrix.runnable(self._selection.rows, up)
        for job_id in self._selection.alternates:
            for node in self._matrix.nodes_of(job_id):
                run[node].append(job_id)
        # built from the core's own typed values: no need to validate them again
        switch = SlotSwitch.model_construct(
            quantum=self._quantum, sent_ns=self._clock.monotonic_ns(), run=run
        )
        self._remember_switch(switch, len(up))
        return switch

    # ------------------------------------------------------------ internals

    def _restore(self) -> None:
        """Take back the jobs of a previous run; running ones wait for their nodes' hello."""
        now = self._clock.monotonic()
        for job in self._store.active():
            job.predictor = self._predictor()
            self._jobs[job.job_id] = job
            if job.state is not JobState.RUNNING:
                continue
            job.live_ranks = set(range(len(job.node_names)))
            row = next(
                (r for r in range(len(self._matrix.rows))
                 if len(self._matrix.free_nodes(r, job.node_names)) == len(job.node_names)),
                len(self._matrix.rows),
            )
            self._matrix.place(job.job_id, row, job.node_names)
            for node in job.node_names:
                self._nodes.expect(node, now)
            if job.barrier_port is not None:
                self._barriers.reserve(job.node_names[0], job.barrier_port)
        if self._jobs:
            log.info("recovered %d jobs from the store", len(self._jobs))

    def _predictor(self) -> UtilizationPredictor:
        return UtilizationPredictor(self.config.sharp_change)

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
        for job_id, rank in sorted(expected - reported):
            job = self._jobs[job_id]
            reason = f"rank {rank} vanished from node {hello.node}"
            self._ranks_gone(job, {rank}, (_lost_state(job), reason))

    def _lose_node(self, name: str, reason: str) -> None:
        if not self._nodes.mark_down(name):
            return
        log.warning("%s: marked down", reason)
        for job in list(self._jobs.values()):
            ranks = {rank for rank in job.live_ranks if job.node_names[rank] == name}
            if ranks:
                self._ranks_gone(job, ranks, (_lost_state(job), reason))
        self._reschedule()

    def _reschedule(self) -> None:
        pending = sorted(
            (job for job in self._jobs.values() if job.state is JobState.PENDING),
            key=lambda job: job.job_id,
        )
        queue = [Request(job.job_id, job.spec.nodes) for job in pending]
        placements = schedule(self._matrix, queue, self._nodes.up(), self.config.mpl)
        for placement in placements:
            self._start(self._jobs[placement.job_id], placement)
        for position, job in enumerate(pending[len(placements):]):
            job.reason = "Resources" if position == 0 else "Priority"

    def _start(self, job: Job, placement: Placement) -> None:
        rank0 = placement.nodes[0]
        node = self._nodes.get(rank0)
        try:
            if node is None or node.peer is None:
                raise NoFreePort(f"node {rank0} has not said where tasks may bind")
            address, bind, port = self._barriers.allocate(job.job_id, rank0, node.peer)
        except NoFreePort as error:
            self._matrix.remove(job.job_id)
            job.reason = str(error)
            return
        job.state = JobState.RUNNING
        job.start_time = self._clock.time()
        job.node_names = list(placement.nodes)
        job.live_ranks = set(range(len(placement.nodes)))
        job.barrier_port = port
        job.reason = ""
        self._store.save(job)
        log.info("job %d starts in row %d on %s", job.job_id, placement.row, ",".join(placement.nodes))
        for rank, name in enumerate(placement.nodes):
            task = TaskSpec(
                job_id=job.job_id,
                rank=rank,
                size=len(placement.nodes),
                argv=job.spec.argv,
                cwd=job.spec.cwd,
                env=job.spec.env,
                barrier_addr=address,
                barrier_bind=bind,
                io_addr=self.config.io_addr,
                output=job.spec.output,
            )
            self.outbox.append((name, LaunchTask(task=task)))

    def _decide_end(self, job: Job, state: JobState, reason: str) -> None:
        """The first cause decides how a running job ends; its other tasks are killed."""
        if job.ending is not None:
            return
        job.ending, job.reason = state, reason
        log.info("job %d ends as %s: %s", job.job_id, state, reason)
        for rank in sorted(job.live_ranks):
            self.outbox.append((job.node_names[rank], KillTask(job_id=job.job_id, reason=reason)))

    def _ranks_gone(
        self,
        job: Job,
        ranks: set[int],
        ending: tuple[JobState, str] | None,
        exit_code: int | None = None,
    ) -> None:
        """Tasks of ``job`` exited or were lost; ``ending`` says if that ends the job."""
        job.live_ranks -= ranks
        if ending is not None and job.ending is None:
            job.exit_code = exit_code
            self._decide_end(job, *ending)
        if job.live_ranks:
            return
        self._matrix.remove(job.job_id)
        self._barriers.release(job.node_names[0], job.barrier_port)
        if job.ending is JobState.PENDING:
            self._requeue(job)
        else:
            self._close(job, job.ending or JobState.COMPLETED)
        self._reschedule()

    def _requeue(self, job: Job) -> None:
        job.state, job.ending = JobState.PENDING, None
        job.requeues += 1
        job.node_names, job.start_time, job.barrier_port = [], None, None
        job.util_pct, job.quantum_utils = None, {}
        job.predictor = self._predictor()
        job.reason = f"requeued: {job.reason}"
        self._store.save(job)

    def _close(self, job: Job, state: JobState) -> None:
        job.state = state
        job.end_time = self._clock.time()
        if state is JobState.COMPLETED:
            job.exit_code = 0
        self._store.save(job)
        del self._jobs[job.job_id]
        log.info("job %d %s", job.job_id, state)

    def _remember_switch(self, switch: SlotSwitch, expected: int) -> None:
        self._switches[switch.quantum] = _Switch(switch.sent_ns, expected)
        self._switch_order.append(switch.quantum)
        if len(self._switch_order) > _SWITCHES_KEPT:
            del self._switches[self._switch_order.popleft()]


def _lost_state(job: Job) -> JobState:
    return JobState.PENDING if job.spec.requeue else JobState.NODE_FAIL


def _say_hello(node: str) -> ErrorReply:
    return ErrorReply(code=ErrorCode.UNKNOWN_NODE, reason=f"node {node} must register first")


def _describe(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"signal {-returncode}"
    return f"status {returncode}"

