"""What every batch policy offers, so that the simulator and the live master drive them alike.

A policy hears of each arrival and each departure, and after every batch of
events at one instant decides which jobs run at what rate: 1.0 for a job that
has its processors to itself, a fraction for one that time-shares them (gang
scheduling), 0 for one that is suspended. It names only the jobs whose rate
changed, and may ask to be woken at a later instant (a planned start). A
policy that migrates jobs also charges them the work lost to
checkpoint and restart. Policies read the clock they are given and nothing
else, so one workload always gives one schedule.

The live master needs more (``LivePolicy``): the columns each job holds in
each time slot (``layout``), to name the nodes its tasks run on; ``adopt``, to
take over jobs that already run on given columns when the policy is rebuilt (a
master restart, a node lost or added); slot homogeneity for paired gang
scheduling (``homogenize``) and the migration cost it measured
(``set_migration_cost``). Policies without time slots (``SpaceSharing``)
answer those with nothing to do, so that no caller asks which kind it has.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from gangsched.policy.columns import Layout
from gangsched.policy.memory import MemoryRequest


class Job(Protocol):
    """A job as a policy may see it: never its real run time, only the user's estimate."""

    job_id: int
    submit: float
    procs: int  # processors: its tasks, each of cpus_per_task processors
    nodes: int | None  # its tasks on exactly this many nodes (Slurm's -N); None: any
    tasks_per_node: int | None  # at most this many on each (--ntasks-per-node); None: any
    cpus_per_task: int  # each task's processors, all on one node (Slurm's -c)
    estimate: float  # > 0: a job holds its processors for some time, or plans could double-book them
    user_priority: float  # Talby & Feitelson 1999's UP and PP; PP -1 marks a user over quota
    political_priority: float
    migratable: bool  # it can checkpoint and restart elsewhere; a policy never moves it otherwise
    memory: MemoryRequest  # what it commits on each node it is placed on (policy/memory.py)
    user: str  # whose it is ("" unknown: a log without users): what fair share is to charge
    priority: float  # its multifactor priority as last computed (policy/multifactor.py); written by its owner only


@dataclass
class Decision:
    rates: dict[int, float] = field(default_factory=dict)  # job id -> new rate
    extra_work: dict[int, float] = field(default_factory=dict)  # job id -> seconds of work lost
    wake_at: float | None = None  # when to decide again even if no job arrives or ends


@dataclass(frozen=True)
class TimeSharing:
    """What a policy with time slots tells of a run: its rows over time and its migrations."""

    average_slots: float  # ∫ rows dt over the run's length (Zhou & Brent 2001)
    migrations: int
    migrated_tasks: int


class Policy(Protocol):
    name: str

    def submit(self, job: Job, now: float) -> None: ...

    def finish(self, job: Job, now: float) -> None: ...

    def schedule(self, now: float) -> Decision: ...

    def reorder(self, now: float) -> None:
        """The waiting jobs' priorities changed: the queues are taken in their new order from the next
        schedule on (policy/priority_order.py)."""

    def time_sharing(self) -> TimeSharing | None:
        """None for a policy without time slots."""


class LivePolicy(Policy, Protocol):
    def layout(self) -> Layout: ...

    def adopt(self, job: Job, columns: int, started: float, now: float) -> None:
        """Take over ``job``, running on ``columns`` since ``started``."""

    def withdraw(self, job: Job, now: float) -> None:
        """``job`` leaves the queue before it starts (cancelled): whatever it held is given up, and the
        jobs behind it may start sooner at the next schedule."""

    def homogenize(self, predictions: Mapping[int, float], now: float) -> None:
        """Move jobs whose predicted utilization is far from their slot's to slots they fit."""

    def set_migration_cost(self, seconds: float) -> None:
        """The cost C of one checkpoint and restart, as measured; for policies that migrate."""


class SpaceSharing:
    """The answers of a policy without time slots: no rows to tell of, regroup or migrate."""

    def time_sharing(self) -> TimeSharing | None:
        return None

    def homogenize(self, predictions: Mapping[int, float], now: float) -> None:
        pass

    def set_migration_cost(self, seconds: float) -> None:
        pass
