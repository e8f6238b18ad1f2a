"""The master's state and how it reacts to each event, without sockets, processes or clocks.

Every public method of its parts is one event (a message arrived, a quantum
ended) with the reading of the clocks the loop took for it (master/clock.py),
and returns the reply for the sender, if any; messages for nodes are appended to
``outbox`` for the daemon's loop (master/loop.py) to send.

``MasterCore`` is made of parts, each holding what it needs and calling the
others through their public methods (docs/architecture.md, 'The two cores'):
the job table (``table``), the queue of waiting jobs (``queue``), starting
(``starts``), migrating (``migrations``) and ending (``endings``) jobs, the
policy's decisions over one matrix (``decisions``), the rows that run each
quantum (``rotation``), what node daemons say (``node_events``) and what
clients ask (``client_requests``). Here: restoring a store's jobs, the quantum
boundary, and the figures of the whole.
"""

import logging
from collections import deque

from gangsched.master.client_requests import ClientRequests
from gangsched.master.clock import Now
from gangsched.master.closing import StoreRetry
from gangsched.master.decisions import Decisions
from gangsched.master.ending import Endings
from gangsched.master.job_table import JobTable
from gangsched.master.migrations import Migrations
from gangsched.master.node_events import NodeEndpoints, NodeEvents
from gangsched.master.nodes import NodeRegistry
from gangsched.master.pending import PendingQueue
from gangsched.master.rotation import SlotRotation
from gangsched.master.scheduling import LiveScheduler
from gangsched.master.settings import MasterSettings
from gangsched.master.starting import Starts
from gangsched.master.stats import STEP_BOUNDS_S, Timings
from gangsched.master.store import JobStore
from gangsched.protocol.messages import MasterStats, Message, SlotSwitch, SwitchStats
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class MasterCore:
    def __init__(self, settings: MasterSettings, endpoints: NodeEndpoints, store: JobStore, now: Now) -> None:
        self.settings = settings
        self.outbox: deque[tuple[str, Message]] = deque()  # (node, message) for the loop to send, in order
        self._store = store
        self._nodes = NodeRegistry()
        scheduler = LiveScheduler(settings.choice(), settings.longest_estimate_s)
        self.store_retry = StoreRetry(settings.quantum_ms / 1000)
        self.table = JobTable(settings, store)
        self.queue = PendingQueue(self.table, scheduler)
        self.starts = Starts(settings, store, self._nodes, self.table, self.queue, self.store_retry, self.outbox)
        self.migrations = Migrations(scheduler, self.outbox)
        self.endings = Endings(store, self.table, self.queue, self.starts, self.migrations, self.store_retry,
                               self.outbox)
        self.rotation = SlotRotation(settings, scheduler, self.outbox)
        self.decisions = Decisions(settings, self.table, self.queue, self.starts, self.migrations, self.endings,
                                   self.rotation, self.store_retry)
        self.node_events = NodeEvents(settings, endpoints, self._nodes, self.table, self.queue, self.starts,
                                      self.migrations, self.endings, self.decisions, self.rotation, self.outbox)
        self.client_requests = ClientRequests(settings, store, self._nodes, self.table, self.endings,
                                              self.decisions, self.rotation, self.store_retry)
        self.report_drain_time = Timings(STEP_BOUNDS_S)  # the loop's reads of the node messages
        self._start_time = now.wall
        self._restore(now)

    def _restore(self, now: Now) -> None:
        """Take back the jobs of a previous run; running ones wait for their nodes' hello."""
        table = self.table
        # a master that starts on a store of an earlier run: its nodes have rejoin_s to come back
        table.rejoin_until = now.monotonic + (self.settings.rejoin_s if self._store.next_job_id() > 1 else 0.0)
        pending = []
        for job in self._store.active():
            job.predictor = table.predictor()
            table.jobs[job.job_id] = job
            if job.state is not JobState.RUNNING:
                pending.append(job)
                continue
            job.live_ranks = set(range(len(job.node_names)))
            self.queue.running(job)  # before the pending jobs: it counts against its array's throttle
            table.unadopted[job.job_id] = job
            for node in job.node_names:
                self._nodes.expect(node, now.monotonic)
            self.starts.restored(job)
        for job in pending:
            self.endings.enqueue(job, now)
        if table.jobs:
            log.info("recovered %d jobs from the store", len(table.jobs))

    def tick(self, now: Now) -> None:
        """A quantum boundary: drop silent nodes, enforce time limits, settle, choose the rows (and put
        the node columns a new layout changed in the outbox, to go out before the switch)."""
        settings = self.settings
        timeout = settings.heartbeat_ms * settings.heartbeat_misses / 1000
        silent, not_back = self._nodes.overdue(now.monotonic, timeout, settings.rejoin_s)
        for name in silent:
            self.node_events.lose_node(name, f"node {name} missed {settings.heartbeat_misses} heartbeats", now)
        for name in not_back:
            self.node_events.lose_node(
                name, f"node {name} did not come back within {settings.rejoin_s:g} s of a master restart", now)
        self.decisions.quantum_ended(self.rotation.ran, now)
        self.rotation.quantum_over()  # what starts now starts with the rows chosen below
        if self.store_retry.due(now.monotonic):
            self.decisions.retry_store(now)
        self.decisions.settle(now)
        self.rotation.choose(self.table.running(), now)

    def switch(self, sent_ns: int) -> SlotSwitch:
        """The switch of the rows the last ``tick`` chose, as it goes out at ``sent_ns`` (monotonic)."""
        return self.rotation.switch(sent_ns)

    def switch_stats(self, last: int, cpu_ns: int) -> SwitchStats:
        """``cpu_ns``: the master process's CPU time, as the loop read it."""
        rotation = self.rotation
        return rotation.switch_log.stats(last, rotation.quantum, cpu_ns)

    def stats(self, cpu_ns: int, resident_bytes: int) -> MasterStats:
        """The figures of the whole; ``cpu_ns`` and ``resident_bytes``: the master process's, as the loop
        read them."""
        switches = self.rotation.switch_log
        return MasterStats(
            start_time=self._start_time,
            quanta=self.rotation.quantum,
            busy_quanta=switches.busy_quanta,
            paired_quanta=switches.paired_quanta,
            scheduling_events=self.decisions.decision_time.count,
            switch_latency=switches.latency.histogram(),
            scheduling=self.decisions.decision_time.histogram(),
            quantum_decision=self.rotation.tick_time.histogram(),
            report_drain=self.report_drain_time.histogram(),
            store_write=self._store.write_time.histogram(),
            store_failures=self.store_retry.failures,
            migrations=self.migrations.costs.count,
            migration_cost=self.migrations.costs.histogram(),
            cpu_s=cpu_ns / 1e9,
            resident_bytes=resident_bytes,
        )
