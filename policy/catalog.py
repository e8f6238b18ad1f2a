"""Every policy by name, with its parameters: what `gang sim`, the experiments and the live master build.

A choice is plain, picklable values, so that sweeps can send runs to worker
processes and the master can take it from its settings.
"""

from collections.abc import Callable
from dataclasses import dataclass, field

from gangsched.policy.backfill import ConservativePolicy, EasyPolicy, FcfsPolicy
from gangsched.policy.interface import LivePolicy
from gangsched.policy.large_jobs import LargeJobs
from gangsched.policy.matrix_settings import RESERVATION_DEPTH, MatrixPolicyKind
from gangsched.policy.slack_settings import SlackSettings
from gangsched.policy.topology import Topology

SPACE_SHARING: dict[str, Callable[[int, Topology | None], LivePolicy]] = {
    "fcfs": FcfsPolicy, "easy": EasyPolicy, "conservative": ConservativePolicy,
}
POLICY_NAMES = [*SPACE_SHARING, "slack", *(kind.value for kind in MatrixPolicyKind)]


@dataclass(frozen=True)
class Choice:
    """A policy and its parameters (docs/policies.md); each policy reads the ones it knows."""

    policy: str = "easy"
    mpl: int = 5
    context_switch: float = 0.0  # CS, a fraction of the slice
    migrate_per_slice: int | None = None  # Q
    migration_cost_s: float = 0.0  # C
    time_slice_s: float = 200.0  # the period over which at most Q tasks migrate
    alpha: float = 0.5  # large: estimate > alpha * the longest estimate
    most_large: int = 2  # j_max
    large_backfill: bool = False
    slack: SlackSettings = field(default_factory=SlackSettings)
    memory_per_node: int | None = None  # bytes; the simulator's machine, whose nodes have one processor each
    reservation_depth: int | None = RESERVATION_DEPTH  # bgs, mbgs: queued jobs with reservations; None: all

    @property
    def time_shares(self) -> bool:
        """Whether its jobs share processors in rows of a matrix (at most ``mpl`` of them)."""
        return self.policy not in SPACE_SHARING and self.policy != "slack"

    def label(self) -> str:
        return f"{self.policy}-{self.mpl}" if self.time_shares else self.policy


def build_policy(choice: Choice, procs: int, longest_estimate: float, topology: Topology | None = None) -> LivePolicy:
    """``longest_estimate`` is t_max of the large-job queue: the workload's longest, or a configured bound.

    ``topology`` groups the ``procs`` processors into nodes; None: one processor per node, with
    ``choice.memory_per_node`` each.
    """
    if topology is None and choice.memory_per_node is not None:
        topology = Topology.uniform(procs, 1, choice.memory_per_node)
    if choice.policy in SPACE_SHARING:
        return SPACE_SHARING[choice.policy](procs, topology)
    # the other policies load when chosen: a simulation of one policy starts faster
    if choice.policy == "slack":
        from gangsched.policy.slack import SlackPolicy

        return SlackPolicy(procs, choice.slack, topology)
    from gangsched.policy.matrix_policy import matrix_policy

    return matrix_policy(
        MatrixPolicyKind(choice.policy), procs, mpl=choice.mpl, context_switch=choice.context_switch,
        migration_cost_s=choice.migration_cost_s, migrate_per_slice=choice.migrate_per_slice,
        time_slice_s=choice.time_slice_s, reservation_depth=choice.reservation_depth,
        large=LargeJobs(choice.alpha * longest_estimate, choice.most_large, choice.large_backfill),
        topology=topology,
    )
