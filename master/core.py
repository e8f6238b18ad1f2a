"""The master's state and how it reacts to each event, without sockets.

Every public method of its parts is one event (a message arrived, a quantum
ended) and returns the reply for the sender, if any; messages for nodes are
appended to ``outbox`` for the daemon's loop (master/loop.py) to send. The
clock is passed in, so tests drive the core without real time.

The decisions are the batch policy's, the same code the simulator runs
(master/scheduling.py puts it in node names): at each scheduling event (an
arrival, a departure, a node up or lost, a time the policy asked to be woken
at) it says which jobs start and which migrate; at each quantum boundary the
quantum planner chooses which of its rows run.

``MasterCore`` is made of parts, each holding what it needs and calling the
others through their public methods: ``lifecycle`` (the jobs, scheduling
events, each job's life), ``rotation`` (which rows run each quantum, the
node columns, the switch log), ``node_events`` (what node daemons say) and
``clients`` (what clients ask). Here: the quantum boundary, and the figures
of the whole.
"""

import logging
from collections import deque

from gangsched.master.clock import Clock
from gangsched.master.lifecycle import JobLifecycle
from gangsched.master.node_events import NodeEndpoints, NodeEvents
from gangsched.master.nodes import NodeRegistry
from gangsched.master.requests import ClientRequests
from gangsched.master.rotation import SlotRotation
from gangsched.master.scheduling import LiveScheduler
from gangsched.master.settings import MasterSettings
from gangsched.master.stats import STEP_BOUNDS_S, Timings, resident_bytes
from gangsched.master.store import JobStore
from gangsched.protocol.messages import MasterStats, Message, SlotSwitch, SwitchStats
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class MasterCore:
    def __init__(self, settings: MasterSettings, endpoints: NodeEndpoints, store: JobStore, clock: Clock) -> None:
        self.settings = settings
        self.outbox: deque[tuple[str, Message]] = deque()  # (node, message) for the loop to send, in order
        self._store = store
        self._clock = clock
        self._nodes = NodeRegistry()
        scheduler = LiveScheduler(settings.choice(), settings.longest_estimate_s)
        self.lifecycle = JobLifecycle(settings, store, clock, self._nodes, scheduler, self.outbox)
        self.rotation = SlotRotation(settings, clock, scheduler, self.outbox)
        self.node_events = NodeEvents(settings, endpoints, clock, self._nodes, scheduler, self.lifecycle,
                                      self.rotation, self.outbox)
        self.clients = ClientRequests(settings.mpi_default, settings.default_mem_per_cpu, store, clock, self._nodes, self.lifecycle, self.rotation)
        self.report_drain_time = Timings(STEP_BOUNDS_S)  # the loop's reads of the node messages
        self._start_time = clock.time()
        self.lifecycle.restore()

    def tick(self) -> SlotSwitch:
        """A quantum boundary: drop silent nodes, enforce time limits, choose the rows, build the switch
        (and put the node columns a new layout changed in the outbox, to go out before it)."""
        now = self._clock.monotonic()
        started_ns = self._clock.monotonic_ns()
        settings = self.settings
        timeout = settings.heartbeat_ms * settings.heartbeat_misses / 1000
        silent, not_back = self._nodes.overdue(now, timeout, settings.rejoin_s)
        for name in silent:
            self.node_events.lose_node(name, f"node {name} missed {settings.heartbeat_misses} heartbeats")
        for name in not_back:
            self.node_events.lose_node(
                name, f"node {name} did not come back within {settings.rejoin_s:g} s of a master restart")
        lifecycle = self.lifecycle
        lifecycle.quantum_ended(self.rotation.ran, now)
        if lifecycle.store_retry.due(now):
            lifecycle.retry_store()
        lifecycle.settle()
        running = [job for job in lifecycle.jobs.values() if job.state is JobState.RUNNING]
        return self.rotation.next_switch(running, now, started_ns)

    def switch_stats(self, last: int) -> SwitchStats:
        rotation = self.rotation
        return rotation.switch_log.stats(last, rotation.quantum, self._clock.process_time_ns())

    def stats(self) -> MasterStats:
        switches, lifecycle = self.rotation.switch_log, self.lifecycle
        return MasterStats(
            start_time=self._start_time,
            quanta=self.rotation.quantum,
            busy_quanta=switches.busy_quanta,
            paired_quanta=switches.paired_quanta,
            scheduling_events=lifecycle.decision_time.count,
            switch_latency=switches.latency.histogram(),
            scheduling=lifecycle.decision_time.histogram(),
            quantum_decision=self.rotation.tick_time.histogram(),
            report_drain=self.report_drain_time.histogram(),
            store_write=self._store.write_time.histogram(),
            store_failures=lifecycle.store_retry.failures,
            migrations=lifecycle.migration_costs.count,
            migration_cost=lifecycle.migration_costs.histogram(),
            cpu_s=self._clock.process_time_ns() / 1e9,
            resident_bytes=resident_bytes(),
        )
