"""The master's side of the node protocol."""

import logging
from collections import deque
from typing import NamedTuple

from gangsched.master.broadcast import Broadcast
from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_steps import TaskId
from gangsched.master.job_table import JobTable
from gangsched.master.matrices import Matrices
from gangsched.master.migrations import Migrations
from gangsched.master.nodes import Node, NodeRegistry
from gangsched.master.placement import limit_of
from gangsched.master.relays import RelayTree
from gangsched.master.settings import MasterSettings
from gangsched.master.starting import Starts
from gangsched.master.tiers import Tiers
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.exits import CHECKPOINTED
from gangsched.protocol.frames import MAX_MESSAGE_BYTES
from gangsched.protocol.messages import (
    ErrorReply,
    ExitAck,
    Heartbeat,
    KillTask,
    LaunchTask,
    Message,
    NodeColumn,
    NodeHello,
    NodeWelcome,
    PmiFence,
    PmiFenceDone,
    PmixModexReply,
    PmixModexRequest,
    QuantumReport,
    TaskExit,
)
from gangsched.protocol.records import JobState, NodeState, TaskSample
from gangsched.protocol.sizes import readable

log = logging.getLogger("gangsched.master")


# what a fence's answer (every node's puts and blobs) may hold: a message, less the room its fields take
MAX_FENCE_BYTES = MAX_MESSAGE_BYTES - 64 * 1024
_PACKED_ENTRY_BYTES = 10  # what msgpack adds to a key and its value, at most, in the answer's map

class NodeEndpoints(NamedTuple):
    """Where the nodes connect for the switches and the reports, as the master bound them."""

    switch: str
    report: str


class NodeEvents:
    """What the node daemons say: hello, heartbeats, quantum reports, exits, PMI barriers."""

    def __init__(self, settings: MasterSettings, endpoints: NodeEndpoints, nodes: NodeRegistry, table: JobTable,
                 matrices: Matrices, tiers: Tiers, starts: Starts, migrations: Migrations, endings: Endings,
                 broadcast: Broadcast, outbox: deque[tuple[str, Message]]) -> None:
        self._settings = settings
        self._endpoints = endpoints
        self._nodes = nodes
        self._relays = RelayTree(settings.relay_fanout)  # which node each node reaches the master through
        # restored jobs: the tasks (step, rank) their daemons, back, had no trace of
        self._unseen: dict[int, set[TaskId]] = {}
        self._undelivered: dict[str, list[Message]] = {}  # by node: what its daemon had left the socket before
        self._table = table
        self._matrices = matrices
        self._tiers = tiers
        self._starts = starts
        self._migrations = migrations
        self._endings = endings
        self._broadcast = broadcast
        self._outbox = outbox

    def hello(self, identity: bytes, hello: NodeHello, now: Now) -> NodeWelcome | ErrorReply | None:
        # a stale hello comes while the daemon reports: each quantum, or each heartbeat when idle
        if self._nodes.stale(hello, now.monotonic, 2 * self._settings.heartbeat_ms / 1000):
            self._stale_hello(hello, now)
            return None
        if hello.memory > hello.host_memory:
            reason = f"node {hello.node} declares {readable(hello.memory)} of memory, its host has " \
                f"{readable(hello.host_memory)}: give gang noded --memory at most that"
            log.error("refused %s", reason)
            return ErrorReply(code=ErrorCode.NODE_REFUSED, reason=reason)
        previous = self._nodes.get(hello.node)
        if previous is not None and not previous.expected_back:
            log.info("node %s registers again (pid %d)", hello.node, hello.pid)
        else:
            log.info("node %s registers: %.2f of a CPU's time, pid %d", hello.node, hello.cpu_share, hello.pid)
        home = self._relays.home(hello.node, hello.relay, hello.left_relay)
        if hello.left_relay is not None:
            log.warning("node %s heard no switch through relay %s: homed anew", hello.node, hello.left_relay)
        held = self._undelivered.pop(hello.node, [])
        self._nodes.register(hello, identity, now.monotonic, home.via)
        if previous is not None and previous.incarnation == hello.incarnation:
            self._outbox.extend((hello.node, message) for message in held)  # before anything this hello brings
        self._take_exits(hello, now)
        self._reconcile_tasks(hello, now)
        self.follow_nodes(now)
        self._outbox.append((hello.node, self._broadcast.hello_column(hello.node)))
        relay = home.endpoints
        return NodeWelcome(
            node=hello.node,
            switch_endpoint=self._endpoints.switch if relay is None else relay.switch,
            report_endpoint=self._endpoints.report if relay is None else relay.report,
            heartbeat_ms=self._settings.heartbeat_ms,
            quantum_ms=self._matrices.shortest_quantum_ms(),  # a switch comes at least this often
            via=home.via,
            relays=home.relays,
        )

    def _stale_hello(self, hello: NodeHello, now: Now) -> None:
        """A hello that left its daemon before this master's welcome to an earlier one arrived (it repeats
        its hello until welcomed): its tasks are old news (a task launched after the welcome, and maybe
        reported running since, would seem to have vanished), and the daemon has its welcome; its exits
        are facts, taken and acknowledged as ever."""
        log.info("node %s: a hello sent before its welcome arrived: only its exits taken", hello.node)
        self._take_exits(hello, now)

    def _take_exits(self, hello: NodeHello, now: Now) -> None:
        """The ends a hello brings, each acknowledged once the store has it; the decisions they bring left to
        the turn's scheduling pass."""
        for exit_ in hello.exits:
            ack = self.ended(exit_, now)
            if ack is not None:
                self._outbox.append((hello.node, ack))

    def heartbeat(self, message: Heartbeat, now: Now) -> ErrorReply | None:
        if self._nodes.seen(message.node, now.monotonic):
            node = self._nodes.get(message.node)
            if node is not None:
                node.refused_stale(message.stale_refused)
            return self._hello_if_owed(message.node)
        return _say_hello(message.node)

    def ended(self, message: TaskExit, now: Now) -> ExitAck | None:
        """A task's end, the decisions it may bring left to the turn's scheduling pass (``MasterCore.scheduling_pass``):
        one after a batch of ends (a node's welcome, a drain of the report socket), not one for each end of a flood
        of small jobs.
        Its acknowledgement, or None while the store has not taken the end (master/ending.py: sent then)."""
        step_id, rank = message.step, message.rank
        self._starts.arrived(message.job_id, step_id, rank)
        ack = ExitAck(job_id=message.job_id, step=step_id, rank=rank)
        job = self._table.get(message.job_id)
        if job is None or not job.is_live(step_id, rank):
            return ack
        job.measured(step_id, message.cpu_ns, message.memory_peak)
        self._table.charge(job.spec.user, job.cpu_uncharged())
        if rank == 0 and step_id == 0:
            job.record_progress(now.monotonic, now.wall, message.progress)
        ending = None
        migration = job.migration
        task = f"rank {rank}" + (f" of step {step_id}" if step_id else "")
        if migration and not migration.restarted and message.error is None and message.returncode == CHECKPOINTED \
                and step_id == 0:
            job.checkpointed(rank)
        elif message.out_of_memory:
            limit = limit_of(job, job.steps[step_id], rank)
            ending = (JobState.OUT_OF_MEMORY, f"{task} on {message.node} passed its memory limit "
                      f"of {readable(limit)} (peak {readable(message.memory_peak)})")
        elif message.error is not None or message.returncode != 0:
            what = message.error or f"exited with {_describe(message.returncode)}"
            ending = (JobState.FAILED, f"{task} on {message.node} {what}")
        if ending is not None and step_id != 0:  # it ends its step, not the job
            self._endings.step_failed(job, step_id, rank, ending[1], message.returncode, now)
        else:
            self._endings.ranks_gone(job, step_id, {rank}, ending, now, exit_code=message.returncode)
        return self._endings.acknowledge(job, message.node, ack, now)

    def report(self, report: QuantumReport, now: Now) -> ErrorReply | None:
        if not self._nodes.seen(report.node, now.monotonic):
            return _say_hello(report.node)
        node = self._nodes.get(report.node)
        share = node.cpu_share / node.processors if node else 1.0  # each task is measured against one processor
        for account in report.accounts:
            self._broadcast.switch_log.reported(account)
            for sample in account.samples:
                self._starts.arrived(sample.job_id, sample.step, sample.rank)
                job = self._table.get(sample.job_id)
                if job is None or job.state is not JobState.RUNNING:
                    continue
                job.measured(sample.step, sample.cpu_ns, sample.memory_peak)  # its user charged at the boundary
                if sample.step:  # the policy's utilization and progress are its first step's
                    continue
                if sample.runnable_ns > 0:
                    job.add_utilization(account.quantum, _utilization(sample, share))
                if sample.rank == 0:
                    job.record_progress(now.monotonic, now.wall, sample.progress)
                    self._migrations.progressed(job, sample.progress, now)
        newest = report.accounts[-1]
        # the column the node holds now: an older account's is superseded
        lost = self._broadcast.columns.reported(report.node, newest.column_epoch, newest.quantum)
        if lost is not None:
            log.warning("node %s applied switch %d with column %d, not %d: sent again", report.node,
                        newest.quantum, newest.column_epoch, lost.epoch)
            self._outbox.append((report.node, lost))
        if node is not None:
            used_ns = sum(sample.cpu_ns for sample in newest.samples)
            quantum_ms = self._matrices.shortest_quantum_ms()  # about the time between two switches
            node.used(min(100.0, 100.0 * used_ns / (quantum_ms * 1e6 * node.cpu_share)))
        return self._hello_if_owed(report.node)

    def pmi_fence(self, fence: PmiFence, now: Now) -> ErrorReply | None:
        """A node's ranks of a job entered a PMI barrier: when every node of the job has, all get every put,
        if it fits in a message (else the job fails: its nodes' ranks put more than a fence carries)."""
        job = self._table.running_on(fence.job_id, fence.node)
        if job is None:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no running job {fence.job_id} on {fence.node}")
        entered = job.fence_entered(fence)  # in the job's node order
        if entered is None:
            return None
        size = sum(len(each.data) + sum(len(key) + len(value) + _PACKED_ENTRY_BYTES for key, value in each.kvs.items())
                   for each in entered)
        if size > MAX_FENCE_BYTES:
            reason = f"its nodes' PMI key-value spaces together hold {size} bytes at fence {fence.epoch}, more " \
                f"than a fence carries ({MAX_FENCE_BYTES})"
            self._endings.decide_end(job, JobState.FAILED, reason, now)
            return None
        done = PmiFenceDone(job_id=job.job_id, step=fence.step, epoch=fence.epoch,
                            kvs={key: value for each in entered for key, value in each.kvs.items()},
                            data=b"".join(each.data for each in entered))
        for node in sorted(each.node for each in entered):
            self._outbox.append((node, done))
        return None

    def pmix_modex_request(self, request: PmixModexRequest) -> ErrorReply | None:
        """A node's PMIx library asks for a rank's data: the rank's node is asked."""
        job = self._table.running_on(request.job_id, request.node)
        step = None if job is None else job.steps.get(request.step)
        if job is None or step is None or request.rank >= len(step.slots):
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no rank {request.rank} of step {request.step} of "
                              f"a running job {request.job_id} on {request.node}")
        self._outbox.append((step.node_of(request.rank, job.node_names), request))
        return None

    def pmix_modex_reply(self, reply: PmixModexReply) -> ErrorReply | None:
        """A rank's node answers a direct-modex request: the node that asked gets the data."""
        job = self._table.running_on(reply.job_id, reply.asker)
        step = None if job is None else job.steps.get(reply.step)
        if job is None or step is None or reply.rank >= len(step.slots) \
                or step.node_of(reply.rank, job.node_names) != reply.node:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no rank {reply.rank} of step {reply.step} of a "
                              f"running job {reply.job_id} on {reply.node}")
        self._outbox.append((reply.asker, reply))
        return None

    def node(self, name: str) -> Node | None:
        return self._nodes.get(name)

    def node_unreachable(self, name: str, now: Now) -> None:
        self.lose_node(name, f"node {name} became unreachable", now)

    def undelivered(self, name: str, message: Message) -> None:
        """``message`` could not reach node ``name``: its daemon left this master's socket. It is not lost
        for that: with several masters, a daemon whose hello went unanswered long enough says hello to the
        next, and a master that took the lead answers hellos only once it has read the store, so its
        answer may find the daemon gone for a moment. The message waits for the same daemon's next hello
        (not a node column, nor a launch: each hello brings the current column, and the launches still on
        their way, ``_reconcile_tasks``); a daemon that does not come back falls silent, and its node is
        lost as any silent node is (``MasterCore.tick``). One that still reports here, its socket to
        this master back without its knowing, is asked for that hello (``_hello_if_owed``)."""
        node = self._nodes.get(name)
        if node is not None and node.state is NodeState.UP:
            held = self._undelivered.setdefault(name, [])
            if not isinstance(message, NodeColumn | LaunchTask):
                held.append(message)

    def _hello_if_owed(self, name: str) -> ErrorReply | None:
        """A node whose daemon missed a message of this master, and reports: it is asked to say hello again,
        which brings what it missed."""
        return _say_hello(name) if name in self._undelivered else None

    def follow_nodes(self, now: Now) -> None:
        """Rebuild the policy of each partition whose nodes up changed; adopt restored jobs whose nodes are
        all back."""
        up = self._nodes.up()
        adopted = [job for job in self._table.adopt(set(up)) if self._launched(job, now)]
        self._tiers.follow_nodes(up, adopted, now)

    def _reconcile_tasks(self, hello: NodeHello, now: Now) -> None:
        reported = {(task.job_id, task.step, task.rank) for task in hello.tasks}
        expected = {
            (job.job_id, step, rank)
            for job in self._table.jobs.values()
            for step, rank in job.live_on(hello.node)
        }
        for job_id, step, rank in sorted(reported - expected):
            log.warning("node %s runs job %d step %d rank %d that is not the master's: killing it",
                        hello.node, job_id, step, rank)
            self._outbox.append((hello.node, KillTask(job_id=job_id, step=step, reason="orphaned task")))
        for job_id, step, rank in reported:
            self._starts.arrived(job_id, step, rank)
        for job_id, step, rank in sorted(expected - reported):
            in_flight = self._starts.in_flight(job_id, step, rank, hello.incarnation)
            if in_flight is not None:
                # the same daemon: the launch is on its way, or this hello left before it came;
                # sent again, it starts the task or is ignored as one that runs
                self._outbox.append((hello.node, in_flight))
                continue
            job = self._table.jobs[job_id]
            if job_id in self._table.unadopted and job.launched_to.get(hello.node) == hello.incarnation:
                self._unseen.setdefault(job_id, set()).add((step, rank))  # decided once all its nodes are back
                continue
            reason = f"rank {rank}" + (f" of step {step}" if step else "") + f" vanished from node {hello.node}"
            self._endings.ranks_gone(job, step, {rank}, (_lost_state(job), reason), now)

    def _launched(self, job: Job, now: Now) -> bool:
        """A job restored running whose nodes are all back: whether its launch reached them.

        A daemon of the incarnation the job was sent to keeps each task, and each exit until the master
        acknowledges it, which it does only once the job's end is committed (group commit). So where no
        rank of the job left a trace on such daemons, the master died before its launch arrived: the job
        goes back to the queue, its start undone. Where only some left none, those are lost."""
        unseen = self._unseen.pop(job.job_id, set())
        if unseen and unseen == job.live_tasks():
            reason = "its launch was lost when the master restarted"
            log.warning("job %d: %s: queued again", job.job_id, reason)
            self._endings.tasks_gone(job, unseen, (JobState.PENDING, reason), now)
            return False
        if unseen:
            vanished = ", ".join(f"{step}.{rank}" if step else str(rank) for step, rank in sorted(unseen))
            self._endings.tasks_gone(job, unseen, (_lost_state(job), f"ranks {vanished} vanished from their "
                                                   "nodes while the master restarted"), now)
        return job.job_id in self._table.jobs and job.ending is None

    def lose_node(self, name: str, reason: str, now: Now) -> None:
        if not self._nodes.mark_down(name):
            return
        self._undelivered.pop(name, None)
        self._relays.lost(name)
        log.warning("%s: marked down", reason)
        self._end_jobs_on(name, reason, now)
        self.follow_nodes(now)

    def take_out(self, name: str, reason: str, now: Now) -> None:
        """An administrator took a node out of service (its mark says so): its jobs end as on a lost node,
        their tasks there killed (its daemon lives on, and stays registered)."""
        for job in self._end_jobs_on(name, reason, now):
            self._outbox.append((name, KillTask(job_id=job.job_id, reason=reason)))

    def _end_jobs_on(self, name: str, reason: str, now: Now) -> list[Job]:
        """The jobs with a task on node ``name`` (or moving there) lose those tasks, and end or are requeued."""
        ended = []
        for job in list(self._table.jobs.values()):
            tasks = job.live_on(name)
            if tasks or name in self._matrices.of(job).queue.scheduler.nodes_of(job.job_id):  # on it, or moving there
                tasks |= self._unseen.pop(job.job_id, set())  # restored: those found on nodes back are gone too
                self._endings.tasks_gone(job, tasks, (_lost_state(job), reason), now)
                ended.append(job)
        return ended


def _lost_state(job: Job) -> JobState:
    return JobState.PENDING if job.spec.requeue else JobState.NODE_FAIL


def _say_hello(node: str) -> ErrorReply:
    return ErrorReply(code=ErrorCode.UNKNOWN_NODE, reason=f"node {node} must register first")


def _utilization(sample: TaskSample, share: float) -> float:
    """What a task wanted of its processor in a quantum, in percent of its CPU ``share`` (at most 100).

    Its CPU time, and where its processor has a core of its own, the time it waited on a run queue
    for a core another process held: there that is the host's other processes taking what the task
    wanted, not idleness. Where nodes share cores (an emulated node's part of a host), the tasks wait
    for each other's nodes by design, and only the CPU time counts.
    """
    wanted_ns = sample.cpu_ns + (sample.waited_ns if share >= 1.0 else 0)
    return min(100.0, 100.0 * wanted_ns / (sample.runnable_ns * share))


def _describe(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"signal {-returncode}"
    return f"status {returncode}"
