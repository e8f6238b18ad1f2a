"""What every node daemon says unasked each few quanta on the report socket: its accounts of the quanta
(``QuantumReport``: when it applied each switch, with which column, what each task used) and its
heartbeats."""

import logging
from collections import deque

from gangsched.master.broadcast import Broadcast
from gangsched.master.clock import Now
from gangsched.master.job_table import JobTable
from gangsched.master.matrices import Matrices
from gangsched.master.migrations import Migrations
from gangsched.master.node_events import NodeEvents
from gangsched.master.nodes import NodeRegistry
from gangsched.master.starting import Starts
from gangsched.protocol.messages import ErrorReply, Heartbeat, Message, QuantumReport
from gangsched.protocol.records import JobState, TaskSample

log = logging.getLogger("gangsched.master")


class NodeReports:
    def __init__(self, nodes: NodeRegistry, table: JobTable, starts: Starts, migrations: Migrations,
                 matrices: Matrices, broadcast: Broadcast, outbox: deque[tuple[str, Message]],
                 registration: NodeEvents) -> None:
        """``registration``: which nodes owe a hello (their daemon missed a message of this master)."""
        self._nodes = nodes
        self._table = table
        self._starts = starts
        self._migrations = migrations
        self._matrices = matrices
        self._broadcast = broadcast
        self._outbox = outbox
        self._registration = registration

    def heartbeat(self, message: Heartbeat, now: Now) -> ErrorReply | None:
        if self._nodes.seen(message.node, now.monotonic):
            node = self._nodes.get(message.node)
            if node is not None:
                node.refused_stale(message.stale_refused)
            return self._registration.hello_if_owed(message.node)
        return self._registration.say_hello(message.node)

    def report(self, report: QuantumReport, now: Now) -> ErrorReply | None:
        if not self._nodes.seen(report.node, now.monotonic):
            return self._registration.say_hello(report.node)
        node = self._nodes.get(report.node)
        share = node.cpu_share / node.processors if node else 1.0  # what one processor of the node has
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
                    job.add_utilization(account.quantum, _utilization(sample, share, job.spec.cpus_per_task))
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
        return self._registration.hello_if_owed(report.node)


def _utilization(sample: TaskSample, share: float, processors: int) -> float:
    """What a task wanted of its ``processors`` in a quantum, in percent of their CPU, ``share`` each (at most
    100).

    Its CPU time, and where its processor has a core of its own, the time it waited on a run queue
    for a core another process held: there that is the host's other processes taking what the task
    wanted, not idleness. Where nodes share cores (an emulated node's part of a host), the tasks wait
    for each other's nodes by design, and only the CPU time counts.
    """
    wanted_ns = sample.cpu_ns + (sample.waited_ns if share >= 1.0 else 0)
    return min(100.0, 100.0 * wanted_ns / (sample.runnable_ns * share * processors))
