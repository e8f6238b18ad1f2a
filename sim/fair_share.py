"""Priorities in the simulator: the same tree, decay, Fair Tree and factors as the master's, on virtual
time (docs/policies.md, "Fair share"; docs/experiments.md, S9).

The accounts come from the log: one per user with equal shares, or one per
group with its users in it (KTH's and SDSC's logs name both). Use is
charged as the fluid schedule delivers it: each running job's processors x
its rate over the time since the last event, to its user association. Every
job is given its priority as it arrives; all waiting jobs' are recomputed
at the first event after each period, and the policy reorders its queues.
"""

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from gangsched.policy.associations import ROOT, AccountShare, AssociationTree, UserShare, equal_shares
from gangsched.policy.fair_tree import UserKey, fair_share_factors
from gangsched.policy.multifactor import PriorityWeights, factors
from gangsched.policy.usage_decay import DecayedUsage
from gangsched.sim.sim_job import SimJob

AccountsFrom = Literal["users", "groups"]

DEFAULT_HALF_LIFE_S = 7 * 86400.0  # Slurm's PriorityDecayHalfLife default
DEFAULT_PERIOD_S = 300.0  # Slurm's PriorityCalcPeriod default, 5 minutes


@dataclass(frozen=True)
class FairShareSettings:
    weights: PriorityWeights
    half_life_s: float = DEFAULT_HALF_LIFE_S
    reset_every_s: float | None = None
    period_s: float = DEFAULT_PERIOD_S
    accounts_from: AccountsFrom = "users"


def tree_of(jobs: list[SimJob], accounts_from: AccountsFrom = "users") -> AssociationTree:
    """The log's users, each charged to one account, and every job's ``account`` set to it."""
    if accounts_from == "users":
        tree = equal_shares(job.user for job in jobs)
        for job in jobs:
            job.account = ROOT
        return tree
    groups = sorted({job.group for job in jobs})
    members = sorted({(job.user, f"group{job.group}") for job in jobs})
    first_account: dict[str, str] = {}
    for job in sorted(jobs, key=lambda job: job.submit):
        first_account.setdefault(job.user, f"group{job.group}")
    for job in jobs:
        job.account = f"group{job.group}"
    return AssociationTree([AccountShare(f"group{group}", ROOT) for group in groups],
                           [UserShare(user, account) for user, account in members], first_account)


class SimPriorities:
    """The owner of the simulated jobs' priorities."""

    def __init__(self, jobs: list[SimJob], settings: FairShareSettings, machine_procs: int) -> None:
        """Builds the tree from ``jobs`` and gives each its account."""
        self.tree = tree = tree_of(jobs, settings.accounts_from)
        self.settings = settings
        self.machine_procs = machine_procs
        self.usage: DecayedUsage[UserKey] = DecayedUsage(settings.half_life_s, settings.reset_every_s)
        self._waiting: dict[int, SimJob] = {}
        self._fair_shares: dict[UserKey, float] = fair_share_factors(tree, {})
        self._next_at = 0.0

    def charge(self, job: SimJob, processor_s: float, now: float) -> None:
        if processor_s > 0:
            self.usage.charge((job.user, job.account), processor_s, now)

    def arrive(self, job: SimJob, now: float) -> None:
        self._waiting[job.job_id] = job
        self._give([job], now)

    def started(self, job: SimJob) -> None:
        self._waiting.pop(job.job_id, None)

    def due(self, now: float) -> bool:
        return now >= self._next_at

    def recompute(self, now: float) -> None:
        """Fair shares from the use as of ``now``, and every waiting job's priority."""
        period = self.settings.period_s
        self._next_at = (now // period + 1) * period
        self._fair_shares = fair_share_factors(self.tree, self.usage.at(now))
        self._give(self._waiting.values(), now)

    def _give(self, jobs: Iterable[SimJob], now: float) -> None:
        weights = self.settings.weights
        for job_id, each in factors(jobs, now, weights, self.machine_procs, self._fair_shares).items():
            self._waiting[job_id].priority = each.priority(weights)
