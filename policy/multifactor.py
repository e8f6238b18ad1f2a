"""A waiting job's priority, from weighted factors (Slurm's priority/multifactor; docs/policies.md).

priority = w_age · age + w_fairshare · fair share + w_size · job size
           + w_partition · partition - nice

each factor in [0, 1]: age is the time waited over the maximum age (1 past
it); fair share is the Fair Tree factor of the job's user in its account
(policy/fair_tree.py); job size is the job's processors over the machine's
(or, favouring small jobs, 1 for one processor down to 0 for the whole
machine); partition is its partition's job factor over the highest. With
every weight zero every job's priority is 0 minus its nice, and the queues
keep arrival order (policy/priority_order.py). Unlike Slurm's, priorities
are not rounded to integers: two jobs tie only where their factors do.
"""

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, fields
from typing import Protocol

from gangsched.policy.fair_tree import UserKey

DEFAULT_MAX_AGE_S = 7 * 86400.0  # Slurm's PriorityMaxAge default, 7-0


class PriorityError(ValueError):
    """A setting of priority that cannot be: one line naming it."""


@dataclass(frozen=True)
class PriorityWeights:
    age: float = 0.0
    fair_share: float = 0.0
    job_size: float = 0.0
    partition: float = 0.0
    max_age_s: float = DEFAULT_MAX_AGE_S
    favor_small: bool = False

    def __post_init__(self) -> None:
        for weight in ("age", "fair_share", "job_size", "partition"):
            value = getattr(self, weight)
            if not value >= 0:
                raise PriorityError(f"priority weight {weight!r} must be 0 or above, got {value}")
        if not self.max_age_s > 0:
            raise PriorityError(f"priority's maximum age must be above 0 s, got {self.max_age_s}")

    @property
    def all_zero(self) -> bool:
        return not (self.age or self.fair_share or self.job_size or self.partition)


@dataclass(frozen=True)
class Factors:
    """What `sprio` shows of one job: each factor unweighted, in [0, 1], and its nice."""

    age: float
    fair_share: float
    job_size: float
    partition: float
    nice: int

    def weighted(self, weights: PriorityWeights) -> dict[str, float]:
        return {field.name: getattr(self, field.name) * getattr(weights, field.name)
                for field in fields(self) if field.name != "nice"}

    def priority(self, weights: PriorityWeights) -> float:
        return sum(self.weighted(weights).values()) - self.nice


class Pending(Protocol):
    """A waiting job as its priority is computed from it."""

    job_id: int
    submit: float
    procs: int
    user: str
    account: str
    nice: int


def factors(pending: Iterable[Pending], now: float, weights: PriorityWeights, machine_procs: int,
            fair_shares: Mapping[UserKey, float], partition_factor: Mapping[int, float] | None = None
            ) -> dict[int, Factors]:
    """Every job's factors at ``now``; ``partition_factor``: job id -> its partition's factor (missing: 1,
    the one partition); a user association missing from ``fair_shares`` has 0 (charged to no share)."""
    computed: dict[int, Factors] = {}
    for job in pending:
        age = min(max(now - job.submit, 0.0) / weights.max_age_s, 1.0)
        if weights.favor_small:
            size = (machine_procs - job.procs) / (machine_procs - 1) if machine_procs > 1 else 1.0
        else:
            size = job.procs / machine_procs
        computed[job.job_id] = Factors(
            age=age, fair_share=fair_shares.get((job.user, job.account), 0.0), job_size=min(max(size, 0.0), 1.0),
            partition=1.0 if partition_factor is None else partition_factor.get(job.job_id, 1.0), nice=job.nice)
    return computed
