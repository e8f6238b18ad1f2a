"""The master's state and how it reacts to each event, without sockets, processes or clocks.

Every public method of its parts is one event (a message arrived, a quantum
ended) with the reading of the clocks the loop took for it (master/clock.py),
and returns the reply for the sender, if any; messages for nodes are appended to
``outbox`` for the daemon's loop (master/loop.py) to send.

``MasterCore`` is made of parts, each holding what it needs and calling the
others through their public methods (docs/architecture.md, 'The two cores'):
the job table (``table``), starting (``starts``), migrating (``migrations``)
and ending (``endings``) jobs, each partition's matrix (``matrices``: its
queue of waiting jobs, its policy's decisions, the rows that run each of its
quanta), what goes to every node at a boundary (``broadcast``), what node
daemons say (``node_events``: their hellos and losses; ``node_reports``, ``task_exits``, ``pmi_relay``,
with ``task_reconciliation`` for the tasks a hello brings), a step started in a running job
(``step_starts``), what clients ask (``client_requests``), and
day-to-day operation: nodes drained, resumed or taken down (``node_service``),
jobs held, released, suspended, resumed or requeued (``job_controls``) or
updated (``job_updates``), users' settings and limits (``users``, ``admission``),
reservations (``reservation_book``), and
the record of every such command (``command_record``).
Here: restoring a store's jobs, the quantum boundaries, and the figures of the
whole.
"""

import logging
from collections import deque

from gangsched.master.broadcast import Broadcast
from gangsched.master.client_requests import ClientRequests
from gangsched.master.clock import Now
from gangsched.master.closing import StoreRetry
from gangsched.master.command_record import CommandRecord
from gangsched.master.decisions import Decisions
from gangsched.master.ending import Endings
from gangsched.master.job_control import JobControls
from gangsched.master.job_record import Job
from gangsched.master.job_signals import JobSignals
from gangsched.master.job_table import JobTable
from gangsched.master.job_update import JobUpdates
from gangsched.master.matrices import Matrices, Matrix
from gangsched.master.migrations import Migrations
from gangsched.master.node_events import NodeEndpoints, NodeEvents
from gangsched.master.node_reports import NodeReports
from gangsched.master.node_service import NodeService
from gangsched.master.nodes import NodeRegistry
from gangsched.master.pending import PendingQueue, Queues
from gangsched.master.pmi_relay import PmiRelay
from gangsched.master.reservation_book import ReservationBook
from gangsched.master.rotation import SlotRotation
from gangsched.master.settings import MasterSettings
from gangsched.master.starting import Starts
from gangsched.master.stats import STEP_BOUNDS_S, Timings
from gangsched.master.step_starts import StepStarts
from gangsched.master.store import JobStore
from gangsched.master.task_exits import TaskExits
from gangsched.master.task_reconciliation import TaskReconciliation
from gangsched.master.tiers import Tiers
from gangsched.master.user_limits import Admission
from gangsched.master.users import Users
from gangsched.master.waiting import WaitKind
from gangsched.policy.live_scheduler import LiveScheduler
from gangsched.policy.partitions import IMPLICIT_PARTITION, Partition
from gangsched.protocol.admin_messages import (
    AdminAction,
    JobControl,
    JobsControlled,
    JobUpdate,
    JobUpdated,
    NodesUpdated,
    NodeUpdate,
    SetLimits,
)
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.hostlists import expand_hostlist
from gangsched.protocol.messages import (
    ErrorReply,
    JobQuery,
    MasterStats,
    Message,
    Reconfigured,
    SetUser,
    SlotSwitch,
    SwitchStats,
)
from gangsched.protocol.records import JobState
from gangsched.protocol.reservation_messages import ReservationCreate, ReservationDelete, ReservationUpdate

log = logging.getLogger("gangsched.master")

# the commands of day-to-day operation the core carries out and records (a reconfiguration, which reads
# the configuration file, is the loop's: master/loop.py)
Administered = (NodeUpdate | JobControl | JobUpdate | SetLimits | SetUser | ReservationCreate | ReservationUpdate
                | ReservationDelete)



def reconfigure_refusal(admin: str) -> ErrorReply | None:
    """Why ``admin`` may not have the master read its configuration file again, if they may not (asked
    before the file is read: what it holds, and what is wrong with it, are root's)."""
    if admin != "root":
        return ErrorReply(code=ErrorCode.PERMISSION_DENIED, reason=f"only root reconfigures the master, not {admin}")
    return None

class MasterCore:
    def __init__(self, settings: MasterSettings, endpoints: NodeEndpoints, store: JobStore, now: Now,
                 partitions: list[tuple[Partition, MasterSettings]] | None = None, io_key: bytes | None = None) -> None:
        """``partitions``: each partition with its matrix's settings (master/config_file.py); none: one over
        every node with ``settings``; ``io_key``: the I/O server's (``--io-key``), which jobs' tokens for it are
        made with."""
        self.settings = settings
        self.outbox: deque[tuple[str, Message]] = deque()  # (node, message) for the loop to send, in order
        self._store = store
        self._nodes = NodeRegistry(store.node_marks())
        self.store_retry = StoreRetry(settings.quantum_ms / 1000)
        self.table = JobTable(settings, store)
        self.queues = Queues()
        self.admission = Admission(store.user_limits())
        self.broadcast = Broadcast(settings, self.outbox)
        self.job_signals = JobSignals(self.table, self.outbox)
        self.starts = Starts(settings, store, self._nodes, self.table, self.queues, self.store_retry, self.outbox,
                             self.broadcast, io_key)
        self.migrations = Migrations(self.queues, self.outbox)
        self.endings = Endings(store, self.table, self.queues, self.starts, self.migrations, self.store_retry,
                               self.outbox)
        self.matrices = Matrices([self._matrix(partition, own, now) for partition, own
                                  in partitions or [(Partition(IMPLICIT_PARTITION, None), settings)]])
        self.tiers = Tiers(self.matrices, self.table, self._nodes, self.endings, store)
        self.task_exits = TaskExits(self.table, self.starts, self.endings)
        self.task_reconciliation = TaskReconciliation(self._nodes, self.table, self.matrices, self.tiers, self.starts,
                                                      self.endings, self.outbox)
        self.node_events = NodeEvents(settings, endpoints, self._nodes, self.matrices, self.broadcast, self.task_exits,
                                      self.task_reconciliation, self.outbox)
        self.node_reports = NodeReports(self._nodes, self.table, self.starts, self.migrations, self.matrices,
                                        self.broadcast, self.outbox, self.node_events)
        self.pmi_relay = PmiRelay(self.table, self.endings, self.outbox)
        self.reservation_book = ReservationBook(store, self._nodes, self.matrices, self.table, self.task_reconciliation,
                                                self.tiers, self.endings, settings.over_time_s, now)
        self.client_requests = ClientRequests(settings, store, self._nodes, self.table, self.endings,
                                              self.matrices, self.admission, self.reservation_book,
                                              self.store_retry)
        self.users = Users(store, self.table, self.admission, self.matrices, self.endings)
        self.node_service = NodeService(self._nodes, self.matrices, self.node_events, self.task_reconciliation, store)
        self.job_controls = JobControls(self._nodes, self.table, self.queues, self.endings, self.tiers, store)
        self.job_updates = JobUpdates(self.table, self.queues, self.endings, self.client_requests, store)
        self.command_record = CommandRecord(store)
        self.step_starts = StepStarts(self.table, self.starts)
        self.report_drain_time = Timings(STEP_BOUNDS_S)  # the loop's reads of the node messages
        self._start_time = now.wall
        self._restore(now)

    def _matrix(self, partition: Partition, settings: MasterSettings, now: Now) -> Matrix:
        scheduler = LiveScheduler(settings.choice(), settings.longest_estimate_s, settings.over_time_s)
        queue = PendingQueue(self.table, scheduler, self.admission)
        self.queues.add(partition.name, queue)
        rotation = SlotRotation(settings, scheduler, partition.name)
        decisions = Decisions(settings, partition.name, self.table, queue, self.starts, self.migrations,
                              self.endings, rotation, self.job_signals)
        return Matrix(partition, settings, queue, decisions, rotation, now.monotonic)

    def _restore(self, now: Now) -> None:
        """Take back the jobs of a previous run; running ones wait for their nodes' hello."""
        table = self.table
        # a master that starts on a store of an earlier run: its nodes have rejoin_s to come back
        table.rejoin_for(now.monotonic + (self.settings.rejoin_s if self._store.next_job_id() > 1 else 0.0))
        pending, homeless = [], []
        for job in self._store.active():
            home = self._home(job)
            job.restored(job.spec if home is None else job.spec.model_copy(update={"partition": home.name}),
                         table.predictor())  # a rank no hello brings ends the job as vanished
            table.add(job)
            if job.state is not JobState.RUNNING:
                pending.append(job)
                continue
            table.started(job)
            if home is None:
                homeless.append(job)
                continue
            self.queues.of(job).running(job)  # before the pending jobs: it counts against its array's throttle
            table.awaits_nodes(job)
            for node in job.node_names:
                self._nodes.expect(node, now.monotonic)
            self.starts.restored(job)
        for job in homeless:  # its tasks are killed as strays when their nodes say hello
            reason = f"no partition of the configuration holds its nodes ({job.spec.partition} is gone)"
            log.warning("job %d: %s: cancelled", job.job_id, reason)
            self.endings.close(job, JobState.CANCELLED, now, reason)
        for job in pending:
            self.endings.enqueue(job, now)
        if table.jobs:
            log.info("recovered %d jobs from the store", len(table.jobs))

    def _home(self, job: Job) -> Matrix | None:
        """The partition a job of a previous run goes on in: its own; if the configuration no longer has it,
        a waiting job's is the default and a running job's the first that holds its nodes (None if none)."""
        named = self.matrices.named(job.spec.partition or "")
        if job.state is not JobState.RUNNING:
            return named or self.matrices.default
        nodes = set(job.node_names)
        return next((matrix for matrix in ([named] if named else []) + list(self.matrices)
                     if all(matrix.partition.holds(node) for node in nodes)), None)

    def reconfigure(self, admin: str, config: str, plan: list[tuple[Partition, MasterSettings]], now: Now,
                    restart_needed: list[str]) -> Reconfigured | ErrorReply:
        """The partitions of a configuration file read again (``plan``), applied whole without losing or
        restarting a job, or refused with the reason and nothing changed. A partition whose definition and
        settings stay keeps its matrix as it is; any other gets a new one, its running jobs adopted where
        they run and its waiting jobs queued again in their order. ``restart_needed``: the master's own
        settings the file changed, which take effect when it next starts."""
        refused = reconfigure_refusal(admin)
        if refused is not None:
            return refused
        refusal = self._reconfigure_refusal(plan)
        if refusal is not None:
            return ErrorReply.nothing_changed(ErrorCode.INVALID_SPEC, f"{config}: {refusal}")
        old = {matrix.name: matrix for matrix in self.matrices}
        matrices, changes = [], []
        for partition, settings in plan:
            kept = old.get(partition.name)
            if kept is not None and kept.partition == partition and kept.settings == settings:
                matrices.append(kept)
                continue
            changes.append(f"partition {partition.name} {'changed' if kept else 'added'}")
            matrices.append(self._matrix(partition, settings, now))
        changes += [f"partition {name} removed" for name in old.keys() - {matrix.name for matrix in matrices}]
        self.queues.keep([matrix.name for matrix in matrices])
        self.matrices.replace(matrices)
        self.tiers.reshape()
        self.broadcast.columns.forget(set(old) - {matrix.name for matrix in matrices})
        moved = [matrix for matrix in matrices if old.get(matrix.name) is not matrix]
        self._move_jobs({matrix.name for matrix in moved}, now)
        changes += [f"{name}: at the next start of the master" for name in restart_needed]
        log.info("reconfigured from %s: %s", config, "; ".join(changes) or "nothing changed")
        return Reconfigured(config=config, partitions=[matrix.name for matrix in matrices], changes=changes)

    def _reconfigure_refusal(self, plan: list[tuple[Partition, MasterSettings]]) -> str | None:
        """Why the partitions of ``plan`` cannot replace the running ones: a partition removed that still
        has jobs, or a running job on nodes its partition would no longer hold."""
        partitions = {partition.name: partition for partition, _ in plan}
        for matrix in self.matrices:
            if matrix.name not in partitions:
                jobs = [job.job_id for job in self.table.jobs.values() if job.spec.partition == matrix.name]
                if jobs:
                    return f"partition {matrix.name} is removed but still has jobs {_ids(jobs)}"
        for job in self.table.running():
            partition = partitions[job.spec.partition or ""] if job.spec.partition in partitions else None
            if partition is not None and not all(partition.holds(node) for node in job.node_names):
                return f"job {job.job_id} runs on nodes partition {partition.name} would no longer hold"
        return None

    def _move_jobs(self, partitions: set[str], now: Now) -> None:
        """The jobs of partitions with a new matrix go into it: the running ones adopted where they run
        (a suspended one stays out until it resumes), the waiting ones queued again in their order."""
        running, waiting = [], []
        for job in self.table.jobs.values():
            if job.spec.partition not in partitions or job.ending is not None:
                continue
            if job.state is JobState.RUNNING:
                self.queues.of(job).running(job)  # it counts against its array's throttle
                if job.job_id not in self.table.unadopted and not job.suspended:
                    running.append(job)
            elif job.wait is None or job.wait.kind is not WaitKind.START_POSTPONED:  # those wait for the store
                waiting.append(job)
        self.tiers.follow_nodes(self._nodes.up(), running, now)
        for job in waiting:
            self.endings.enqueue(job, now)

    def administer(self, message: Administered, now: Now) -> Message:
        """A command of day-to-day operation carried out, or refused, and recorded either way; one sent again
        with the same token (a retry after a lost reply) is answered as it was, and not carried out again."""
        earlier = self.command_record.earlier(message)
        if earlier is not None:
            return self._answered_before(message, earlier, now)
        reply: Message
        match message:
            case NodeUpdate():
                reply = self.node_service.update(message, now)
            case JobControl():
                reply = self.job_controls.act(message, now)
            case JobUpdate():
                reply = self.job_updates.update(message, now)
            case SetLimits():
                reply = self.users.set_limits(message, now)
            case ReservationCreate():
                reply = self.reservation_book.create(message, now)
            case ReservationUpdate():
                reply = self.reservation_book.update(message, now)
            case ReservationDelete():
                reply = self.reservation_book.delete(message, now)
            case SetUser():
                reply = self.users.set_user(message)
        return self.command_record.recorded(message, reply, now)

    def _answered_before(self, message: Administered, earlier: AdminAction, now: Now) -> Message:
        """The answer to a command carried out (or refused) before, as things are now."""
        if earlier.result != "done":
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=earlier.result.removeprefix("refused: "))
        match message:
            case NodeUpdate():
                return NodesUpdated(nodes=expand_hostlist(message.nodes), action=message.action)
            case JobControl():
                jobs = self.client_requests.query_jobs(JobQuery(job_ids=message.job_ids), now).jobs
                return JobsControlled(action=message.action, jobs=jobs)
            case JobUpdate():
                (job,) = self.client_requests.query_jobs(JobQuery(job_ids=[message.job_id]), now).jobs
                return JobUpdated(job=job, changes=[f"as asked before ({earlier.command})"])
            case SetLimits() | SetUser():
                return self.users.query_users()
        return self.reservation_book.query()

    def next_boundary(self) -> float:
        """When the next quantum boundary of any matrix is due (monotonic seconds)."""
        return self.matrices.next_boundary()

    def scheduling_pass(self, now: Now) -> None:
        """One scheduling pass: every matrix decides what the events of the turn changed (arrivals, ends,
        nodes come and gone, commands), highest tier first. The loop runs it once at the end of each turn,
        after its events and before its commit (master/loop.py), and the quantum boundary runs its own
        (``tick``): no handler runs it, so that a flood of events costs one pass, not one each. Then the use
        the turn charged goes with its writes (``JobTable.write_charges``)."""
        self.tiers.settle(now)
        self.table.write_charges()

    def tick(self, now: Now) -> None:
        """A quantum boundary of the matrices whose boundary is due by ``now`` (at least the earliest's):
        drop silent nodes, enforce their time limits, settle, choose their rows; put the node columns new
        layouts changed in the outbox, to go out before the switch."""
        settings = self.settings
        timeout = settings.heartbeat_ms * settings.heartbeat_misses / 1000
        silent, not_back = self._nodes.overdue(now.monotonic, timeout, settings.rejoin_s)
        for name in silent:
            self.node_events.lose_node(name, f"node {name} missed {settings.heartbeat_misses} heartbeats", now)
        for name in not_back:
            self.node_events.lose_node(
                name, f"node {name} did not come back within {settings.rejoin_s:g} s of a master restart", now)
        if not settings.return_to_service:
            for name in [*silent, *not_back]:
                self.node_service.not_responding(name, now)
        matrices = self.matrices
        due = matrices.due(max(now.monotonic, matrices.next_boundary()))
        for matrix in due:
            matrix.decisions.quantum_ended(matrix.rotation.ran, now)
            matrix.rotation.quantum_over()  # what starts now starts with the rows chosen below
        if self.store_retry.due(now.monotonic):
            self._retry_store(now)
        self.reservation_book.tick(now)
        self.scheduling_pass(now)  # the boundary's own events decided before its rows are chosen
        running = self.table.running()
        for matrix in due:
            matrix.rotation.choose([job for job in running if job.spec.partition == matrix.name], now)
            matrix.boundary_passed(now.monotonic)
        self.broadcast.boundary(now)
        self.broadcast.columns_of({matrix.name: (matrix.queue.scheduler.rows, matrix.queue.scheduler.nodes)
                                   for matrix in matrices})
        self.broadcast.runs({matrix.name: matrix.rotation.running(matrix in due) for matrix in matrices},
                            [matrix.rotation.selection for matrix in due], self._nodes.count_up(),
                            matrices.shortest_quantum_ms())

    def _retry_store(self, now: Now) -> None:
        """The store is due to be tried again: the closes that wait, and the starts it could not write
        (placed again: a start that fails again sets the next try)."""
        self.endings.write_closes(now)
        if not self.endings.waiting_for_store:
            self.store_retry.succeeded()  # nothing waits for the store now
        for job_id in self.store_retry.take_postponed():
            job = self.table.get(job_id)
            if job is not None and job.state is JobState.PENDING:  # not cancelled meanwhile
                job.waits(None)  # it waits as any other now
                self.queues.of(job).resubmit(job, now)
        for queue in self.queues:
            queue.event()

    def switch(self, sent_ns: int) -> SlotSwitch:
        """The switch of the boundary the last ``tick`` decided, as it goes out at ``sent_ns`` (monotonic)."""
        return self.broadcast.switch(sent_ns)

    def switch_stats(self, last: int, cpu_ns: int) -> SwitchStats:
        """``cpu_ns``: the master process's CPU time, as the loop read it."""
        broadcast = self.broadcast
        return broadcast.switch_log.stats(last, broadcast.quantum, cpu_ns)

    def stats(self, cpu_ns: int, resident_bytes: int) -> MasterStats:
        """The figures of the whole; ``cpu_ns`` and ``resident_bytes``: the master process's, as the loop
        read them."""
        switches = self.broadcast.switch_log
        decisions = Timings.merged([matrix.decisions.decision_time for matrix in self.matrices])
        return MasterStats(
            start_time=self._start_time,
            quanta=self.broadcast.quantum,
            busy_quanta=switches.busy_quanta,
            paired_quanta=switches.paired_quanta,
            scheduling_events=decisions.count,
            switch_latency=switches.latency.histogram(),
            scheduling=decisions.histogram(),
            quantum_decision=self.broadcast.tick_time.histogram(),
            report_drain=self.report_drain_time.histogram(),
            store_write=self._store.write_time.histogram(),
            store_failures=self.store_retry.failures,
            migrations=self.migrations.costs.count,
            migration_cost=self.migrations.costs.histogram(),
            cpu_s=cpu_ns / 1e9,
            resident_bytes=resident_bytes,
        )


def _ids(jobs: list[int]) -> str:
    shown = ",".join(map(str, jobs[:10]))
    return shown if len(jobs) <= 10 else f"{shown} and {len(jobs) - 10} more"
