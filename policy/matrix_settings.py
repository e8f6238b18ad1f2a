"""What a matrix policy is set up with (policy/matrix_policy.py): its kind by the papers' names, its
settings, and what it counts as it runs."""

from dataclasses import dataclass
from enum import StrEnum

from gangsched.policy.large_jobs import LargeJobs

RESERVATION_DEPTH = 500  # as Flux's reservation-depth and Slurm's queue depths bound theirs


@dataclass(frozen=True)
class MatrixSettings:
    mpl: int | None = 5  # rows at most; None: as many as the jobs need
    backfill: bool = False
    migration: bool = False
    context_switch: float = 0.0  # CS: the fraction of each slice lost to switching
    migration_cost_s: float = 0.0  # C: one checkpoint and restart
    migrate_per_slice: int | None = None  # Q, in tasks; None: no limit
    time_slice_s: float = 200.0
    large: LargeJobs | None = None
    # BGS, MBGS: how many of the queue's first jobs hold reservations and are tried at each event; the
    # rest wait their turn untried, so that an event costs the same at any depth (docs/policies.md)
    reservation_depth: int | None = RESERVATION_DEPTH

    def __post_init__(self) -> None:
        if self.large is not None and self.migration:
            raise ValueError("the large-job queue is defined without migration (Zhou & Brent 2001)")


class MatrixPolicyKind(StrEnum):
    GS = "gs"
    BGS = "bgs"
    MGS = "mgs"
    MBGS = "mbgs"
    GS_LARGE_QUEUE = "gs-largeq"


@dataclass
class MatrixStats:
    slot_seconds: float = 0.0  # ∫ rows dt, for the average number of time slots (Zhou & Brent 2001)
    seconds: float = 0.0
    migrations: int = 0
    migrated_tasks: int = 0

    @property
    def average_slots(self) -> float:
        return self.slot_seconds / self.seconds if self.seconds else 0.0
