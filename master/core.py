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

The parts: ``requests`` (clients), ``node_events`` (node daemons),
``lifecycle`` (scheduling events and each job's life, shared by both), and
here the quantum boundary.
"""

import logging
from collections import deque

from gangsched.master.barriers import BarrierEndpoints
from gangsched.master.node_columns import NodeColumns
from gangsched.master.node_events import NodeEvents
from gangsched.master.nodes import NodeRegistry
from gangsched.master.relays import RelayTree
from gangsched.master.requests import ClientRequests
from gangsched.master.scheduling import LiveScheduler
from gangsched.master.settings import MasterSettings
from gangsched.master.state import Clock, NodeEndpoints
from gangsched.master.stats import MIGRATION_BOUNDS_S, STEP_BOUNDS_S, Timings
from gangsched.master.store import JobStore
from gangsched.master.switches import SwitchLog
from gangsched.policy.quantum import PlanInput, Selection, planner
from gangsched.protocol.messages import MAX_REPORT_QUANTA, SlotSwitch
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class MasterCore(ClientRequests, NodeEvents):
    def __init__(self, settings: MasterSettings, endpoints: NodeEndpoints, store: JobStore, clock: Clock) -> None:
        self.settings = settings
        self._endpoints = endpoints
        self.outbox = deque()
        self._store = store
        self._clock = clock
        self._jobs = {}
        self._dependent = {}
        self._nodes = NodeRegistry()
        self._relays = RelayTree(settings.relay_fanout)
        self._barriers = BarrierEndpoints()
        self._scheduler = LiveScheduler(settings.choice(), settings.longest_estimate_s)
        self._planner = planner(settings.pairing_used(), settings.matching, settings.coordination)
        self._dirty = False
        self._wake_at = None
        self._launching = {}
        self._unadopted = {}
        self._quantum = 0
        self._selection = Selection(())
        self._ran = set()
        self._columns = NodeColumns()
        self._last_tick = None
        self._switch_log = SwitchLog()
        self._migration_costs = Timings(MIGRATION_BOUNDS_S)
        self._decision_time = Timings(STEP_BOUNDS_S)
        self.tick_time = Timings(STEP_BOUNDS_S)
        self.report_drain_time = Timings(STEP_BOUNDS_S)  # the daemon's reads of the node messages
        self._start_time = clock.time()
        self._accounts = {account.user: account for account in store.accounts()}
        self._restore()

    def tick(self) -> SlotSwitch:
        """A quantum boundary: drop silent nodes, enforce time limits, choose the rows, build the switch
        (and put the node columns a new layout changed in the outbox, to go out before it)."""
        now = self._clock.monotonic()
        started_ns = self._clock.monotonic_ns()
        timeout = self.settings.heartbeat_ms * self.settings.heartbeat_misses / 1000
        rejoin = self.settings.rejoin_s
        silent, not_back = self._nodes.overdue(now, timeout, rejoin)
        for name in silent:
            self._lose_node(name, f"node {name} missed {self.settings.heartbeat_misses} heartbeats")
        for name in not_back:
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
        # the columns a new layout changed go out first: the switch names rows of that layout
        self.outbox.extend(self._columns.update(scheduler.rows, scheduler.nodes, self._quantum))
        self._ran = {job_id for row in self._selection.rows for job_id in scheduler.layout[row]}
        self._ran.update(self._selection.alternates)
        nodes = len(scheduler.nodes)
        switch = SlotSwitch(quantum=self._quantum, sent_ns=self._clock.monotonic_ns(),
                            rows=list(self._selection.rows), alternates=list(self._selection.alternates),
                            report_every=self._report_every(nodes))
        self._switch_log.sent(switch, self._selection, nodes)
        self.tick_time.observe((switch.sent_ns - started_ns) / 1e9)
        return switch

    def _report_every(self, nodes: int) -> int:
        """How many quanta's accounts a node sends in one report: those of ``report_interval_ms``, and
        on a large cluster enough that about ``reports_per_quantum`` reports arrive each quantum."""
        settings = self.settings
        return min(MAX_REPORT_QUANTA, max(1, settings.report_interval_ms // settings.quantum_ms,
                                          -(-nodes // settings.reports_per_quantum)))

    def _restore(self) -> None:
        """Take back the jobs of a previous run; running ones wait for their nodes' hello."""
        now = self._clock.monotonic()
        # a master that starts on a store of an earlier run: its nodes have rejoin_s to come back
        self._rejoin_until = now + self.settings.rejoin_s if self._store.next_job_id() > 1 else now
        for job in self._store.active():
            job.predictor = self._predictor()
            self._jobs[job.job_id] = job
            if job.state is not JobState.RUNNING:
                self._enqueue(job)
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
