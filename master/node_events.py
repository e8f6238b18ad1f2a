"""The master's side of the node protocol."""

import logging

from gangsched.master.jobs import Job
from gangsched.master.lifecycle import JobLifecycle
from gangsched.master.nodes import Node
from gangsched.master.placement import processors_of
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.exits import CHECKPOINTED
from gangsched.protocol.messages import (
    ErrorReply,
    ExitAck,
    Heartbeat,
    KillTask,
    NodeHello,
    NodeWelcome,
    PmiFence,
    PmiFenceDone,
    QuantumReport,
    TaskExit,
)
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class NodeEvents(JobLifecycle):
    """What the node daemons say: hello, heartbeats, quantum reports, exits, PMI barriers."""

    def hello(self, identity: bytes, hello: NodeHello) -> NodeWelcome:
        previous = self._nodes.get(hello.node)
        if previous is not None and previous.peer is not None:
            log.info("node %s registers again (pid %d)", hello.node, hello.pid)
        else:
            log.info("node %s registers: %.2f cpus, pid %d", hello.node, hello.cpus, hello.pid)
        home = self._relays.home(hello.node, hello.relay, hello.left_relay)
        if hello.left_relay is not None:
            log.warning("node %s heard no switch through relay %s: homed anew", hello.node, hello.left_relay)
        self._nodes.register(hello, identity, self._clock.monotonic(), home.via)
        for exit_ in hello.exits:
            self.outbox.append((hello.node, self.task_exit(exit_)))
        self._reconcile_tasks(hello)
        self._follow_nodes()
        self._settle()
        self.outbox.append((hello.node, self._columns.hello(hello.node, self._quantum)))
        relay = home.endpoints
        return NodeWelcome(
            node=hello.node,
            switch_endpoint=self._endpoints.switch if relay is None else relay.switch,
            report_endpoint=self._endpoints.report if relay is None else relay.report,
            heartbeat_ms=self.settings.heartbeat_ms,
            quantum_ms=self.settings.quantum_ms,
            via=home.via,
            relays=home.relays,
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
        node = self._nodes.get(report.node)
        share = node.cpus / node.processors if node else 1.0  # each task is measured against one processor
        now, wall = self._clock.monotonic(), self._clock.time()
        for account in report.accounts:
            self._switch_log.reported(account)
            for sample in account.samples:
                self._launching.pop((sample.job_id, sample.rank), None)
                job = self._jobs.get(sample.job_id)
                if job is None or job.state is not JobState.RUNNING:
                    continue
                job.cpu_ns += sample.cpu_ns
                if sample.runnable_ns > 0:
                    job.add_utilization(account.quantum, 100.0 * sample.cpu_ns / (sample.runnable_ns * share))
                if sample.rank == 0:
                    job.record_progress(now, wall, sample.progress)
                    self._migrated(job, sample.progress)
        newest = report.accounts[-1]
        # the column the node holds now: an older account's is superseded
        lost = self._columns.reported(report.node, newest.column_epoch, newest.quantum)
        if lost is not None:
            log.warning("node %s applied switch %d with column %d, not %d: sent again", report.node,
                        newest.quantum, newest.column_epoch, lost.epoch)
            self.outbox.append((report.node, lost))
        if node is not None:
            used_ns = sum(sample.cpu_ns for sample in newest.samples)
            node.util_pct = min(100.0, 100.0 * used_ns / (self.settings.quantum_ms * 1e6 * node.cpus))
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

    def _follow_nodes(self) -> None:
        """Rebuild the policy when the nodes up changed; adopt restored jobs whose nodes are all back."""
        up = self._nodes.up()
        adopted = [job for job in self._unadopted.values() if set(job.node_names) <= set(up)]
        if up == self._scheduler.processor_counts() and not adopted:
            return
        self._scheduler.rebuild(up, self._clock.monotonic(), [
            (self._policy_job(job), processors_of(job), self._monotonic(job.start_time or job.submit_time))
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
            if in_flight is not None and in_flight[0] == hello.incarnation:
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
        self._relays.lost(name)
        log.warning("%s: marked down", reason)
        for job in list(self._jobs.values()):
            ranks = {rank for rank in job.live_ranks if job.node_names[rank] == name}
            if ranks or name in self._scheduler.nodes_of(job.job_id):  # on it, or migrating to it
                self._ranks_gone(job, ranks, (_lost_state(job), reason))
        self._follow_nodes()


def _lost_state(job: Job) -> JobState:
    return JobState.PENDING if job.spec.requeue else JobState.NODE_FAIL


def _say_hello(node: str) -> ErrorReply:
    return ErrorReply(code=ErrorCode.UNKNOWN_NODE, reason=f"node {node} must register first")


def _describe(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"signal {-returncode}"
    return f"status {returncode}"
