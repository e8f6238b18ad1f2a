"""The state the master's parts share, and what the master is given: a clock and its node endpoints."""

from collections import deque
from typing import NamedTuple, Protocol

from gangsched.master.accounts import Account
from gangsched.master.barriers import BarrierEndpoints
from gangsched.master.jobs import Job
from gangsched.master.node_columns import NodeColumns
from gangsched.master.nodes import NodeRegistry
from gangsched.master.relays import RelayTree
from gangsched.master.scheduling import LiveScheduler
from gangsched.master.settings import MasterSettings
from gangsched.master.stats import Timings
from gangsched.master.store import JobStore
from gangsched.master.switches import SwitchLog
from gangsched.policy.quantum import QuantumPlanner, Selection
from gangsched.protocol.messages import LaunchTask, Message


class Clock(Protocol):
    def monotonic(self) -> float: ...
    def monotonic_ns(self) -> int: ...
    def time(self) -> float: ...
    def process_time_ns(self) -> int: ...


class NodeEndpoints(NamedTuple):
    """Where the nodes connect for the switches and the reports, as the master bound them."""

    switch: str
    report: str


class CoreState:
    """What the master's parts share; ``MasterCore.__init__`` sets every attribute."""

    settings: MasterSettings
    outbox: deque[tuple[str, Message]]  # (node, message) for the daemon to send, in order
    _endpoints: NodeEndpoints
    _store: JobStore
    _clock: Clock
    _jobs: dict[int, Job]  # pending and running only
    _dependent: dict[int, Job]  # pending, held back from the policy by the jobs they depend on
    _nodes: NodeRegistry
    _relays: RelayTree  # which node each node reaches the master through
    _barriers: BarrierEndpoints
    _scheduler: LiveScheduler
    _planner: QuantumPlanner
    _dirty: bool  # a scheduling event happened: the policy must decide again
    _wake_at: float | None
    # launches no hello, report or exit has shown to arrive yet, with the incarnation of the node
    # daemon they went to: a repeated hello of that daemon may have crossed them on the way
    _launching: dict[tuple[int, int], tuple[str, LaunchTask]]
    _unadopted: dict[int, Job]  # running before a restart, until their nodes say hello
    _rejoin_until: float
    _quantum: int
    _selection: Selection
    _ran: set[int]  # the jobs the last switch ran
    _columns: NodeColumns  # each node's column of the matrix, as sent
    _last_tick: float | None
    _switch_log: SwitchLog
    _migration_costs: Timings
    _decision_time: Timings  # of each scheduling event's decisions
    tick_time: Timings  # of each quantum boundary
    report_drain_time: Timings  # of each read of the node messages waiting
    _accounts: dict[str, Account]
    _start_time: float
