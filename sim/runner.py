"""One simulation from a policy's name and parameters: what `gang sim`, its sweeps and the
experiments S1-S6 all run.

A run is described by plain, picklable values (``Choice``), so that sweeps can
send runs to worker processes.
"""

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field

from gangsched.policy.backfill import ConservativePolicy, EasyPolicy, FcfsPolicy
from gangsched.policy.interface import Policy
from gangsched.policy.matrix_policy import LargeJobs, MatrixPolicy, MatrixPolicyKind, matrix_policy
from gangsched.policy.slack import SlackPolicy, SlackSettings
from gangsched.sim.engine import simulate
from gangsched.sim.jobs import SimJob
from gangsched.sim.metrics import Summary, summarize

SPACE_SHARING: dict[str, Callable[[int], Policy]] = {
    "fcfs": FcfsPolicy, "easy": EasyPolicy, "conservative": ConservativePolicy,
}
POLICY_NAMES = [*SPACE_SHARING, "slack", *(kind.value for kind in MatrixPolicyKind)]


@dataclass(frozen=True)
class Choice:
    """A policy and its parameters (SPEC §4-6); each policy reads the ones it knows."""

    policy: str = "easy"
    mpl: int = 5
    context_switch: float = 0.0  # CS, a fraction of the slice
    migrate_per_slice: int | None = None  # Q
    migration_cost_s: float = 0.0  # C
    alpha: float = 0.5  # large: estimate > alpha * the longest estimate
    most_large: int = 2  # j_max
    large_backfill: bool = False
    slack: SlackSettings = field(default_factory=SlackSettings)

    def label(self) -> str:
        return self.policy if self.policy in SPACE_SHARING or self.policy == "slack" else f"{self.policy}-{self.mpl}"


@dataclass(frozen=True)
class Outcome:
    choice: Choice
    summary: Summary
    average_slots: float | None = None  # matrix policies only
    migrations: int | None = None
    migrated_tasks: int | None = None


def build_policy(choice: Choice, procs: int, jobs: list[SimJob]) -> Policy:
    if choice.policy in SPACE_SHARING:
        return SPACE_SHARING[choice.policy](procs)
    if choice.policy == "slack":
        return SlackPolicy(procs, choice.slack)
    longest = max((job.estimate for job in jobs), default=0.0)
    return matrix_policy(
        MatrixPolicyKind(choice.policy), procs, mpl=choice.mpl, context_switch=choice.context_switch,
        migration_cost_s=choice.migration_cost_s, migrate_per_slice=choice.migrate_per_slice,
        large=LargeJobs(choice.alpha * longest, choice.most_large, choice.large_backfill),
    )


def run(choice: Choice, jobs: list[SimJob], procs: int, progress: Callable[[int], None] | None = None) -> Outcome:
    """Simulate ``jobs`` (copied: the caller's are left as they were) and summarize the schedule."""
    return run_keeping_jobs(choice, jobs, procs, progress)[0]


def run_keeping_jobs(choice: Choice, jobs: list[SimJob], procs: int,
                     progress: Callable[[int], None] | None = None) -> tuple[Outcome, list[SimJob]]:
    """As ``run``, and the scheduled jobs too (for per-job CSV and SWF output)."""
    scheduled = [dataclasses.replace(job) for job in jobs]
    policy = build_policy(choice, procs, scheduled)
    totals = simulate(scheduled, policy, progress)
    outcome = Outcome(choice, summarize(scheduled, procs, totals))
    if isinstance(policy, MatrixPolicy):
        stats = policy.stats
        outcome = dataclasses.replace(outcome, average_slots=stats.average_slots, migrations=stats.migrations,
                                      migrated_tasks=stats.migrated_tasks)
    return outcome, scheduled


def prioritize(jobs: list[SimJob], every: int, priority: float = 1.0) -> list[SimJob]:
    """Every ``every``-th job gets user and political priority ``priority``, the others 0 (seed 002 §3.3)."""
    return [dataclasses.replace(job, user_priority=priority, political_priority=priority)
            if index % every == every - 1 else job for index, job in enumerate(jobs)]
