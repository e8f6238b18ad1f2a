"""The batch policy on the live cluster: the simulator's policy code, in node names.

A policy sees processors 0..N-1; here column i is the i-th node up, in name
order. When the set of nodes up changes, the policy is rebuilt for the new
set: running jobs are adopted on their nodes and waiting ones submitted again
in their order, so reservations and slack are planned anew (a node joining or
leaving is rare). A job withdrawn while it waits rebuilds the policy too: a
policy only hears of arrivals and departures. A waiting job wider than the
nodes up is held back from the policy until enough nodes are up.
"""

import dataclasses
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from gangsched.policy.catalog import Choice, build_policy
from gangsched.policy.columns import Layout, column_list, mask_of
from gangsched.policy.interface import LivePolicy
from gangsched.policy.matrix_policy import MatrixPolicy


@dataclass
class PolicyJob:
    """A master job as a policy sees it (policy/interface.py ``Job``)."""

    job_id: int
    submit: float
    procs: int
    estimate: float
    user_priority: float = 0.0
    political_priority: float = 0.0
    migratable: bool = False


@dataclass(frozen=True)
class Changes:
    starts: dict[int, list[str]]  # job id -> its nodes, rank r on the r-th
    moves: dict[int, list[str]]  # running job -> the nodes it migrates to
    wake_at: float | None  # when the policy wants to decide again


@dataclass
class _Running:
    job: PolicyJob
    columns: int
    started: float


class LiveScheduler:
    def __init__(self, choice: Choice, longest_estimate: float) -> None:
        self.choice = choice
        self._longest_estimate = longest_estimate
        self.nodes: list[str] = []
        self.layout: Layout = []
        self.rows: list[dict[str, int]] = []  # per row: node -> the job whose task runs there
        self._policy: LivePolicy = self._build(0)
        self._waiting: dict[int, PolicyJob] = {}  # submitted to the policy, in order
        self._held: dict[int, PolicyJob] = {}  # wider than the nodes up
        self._running: dict[int, _Running] = {}

    @property
    def name(self) -> str:
        return self._policy.name

    def nodes_of(self, job_id: int) -> list[str]:
        running = self._running.get(job_id)
        return [] if running is None else self._names(running.columns)

    def is_waiting(self, job_id: int) -> bool:
        return job_id in self._waiting or job_id in self._held

    def submit(self, job: PolicyJob, now: float) -> None:
        if job.procs > len(self.nodes):
            self._held[job.job_id] = job
            return
        self._waiting[job.job_id] = job
        self._policy.submit(job, now)

    def finish(self, job_id: int, now: float) -> None:
        """A running job leaves: it ended, or its end was decided (its tasks may still be exiting)."""
        running = self._running.pop(job_id, None)
        if running is not None:
            self._policy.finish(running.job, now)

    def withdraw(self, job_id: int, now: float) -> None:
        """A waiting job leaves the queue (cancelled, or held back for good)."""
        if self._held.pop(job_id, None) is None and self._waiting.pop(job_id, None) is not None:
            self.rebuild(self.nodes, now)

    def is_held(self, job_id: int) -> bool:
        return job_id in self._held

    def rebuild(self, nodes: list[str], now: float, adopt: Iterable[tuple[PolicyJob, list[str], float]] = ()) -> None:
        """The nodes up changed: a new policy for them, with the jobs still running on them.

        ``adopt`` adds running jobs the policy never placed (their job, nodes and start),
        as after a master restart.
        """
        column = {name: index for index, name in enumerate(nodes)}
        known = [(each.job, self._names(each.columns), each.started) for each in self._running.values()]
        running = {}
        for job, names, started in [*known, *adopt]:
            if any(name not in column for name in names):
                raise ValueError(f"job {job.job_id} runs on a node that is not up: end it before the rebuild")
            running[job.job_id] = _Running(job, mask_of(column[name] for name in names), started)
        waiting = sorted([*self._waiting.values(), *self._held.values()], key=lambda job: job.job_id)
        self.nodes, self._policy, self._running = list(nodes), self._build(len(nodes)), running
        self._waiting, self._held = {}, {}
        for each in running.values():
            self._policy.adopt(each.job, each.columns, each.started, now)
        for job in waiting:
            self.submit(job, now)
        self._read_layout()

    def schedule(self, now: float) -> Changes:
        decision = self._policy.schedule(now)
        self._read_layout()
        starts, moves = {}, {}
        for row in self.layout:
            for job_id, columns in row.items():
                running = self._running.get(job_id)
                if running is None:
                    job = self._waiting.pop(job_id)
                    self._running[job_id] = _Running(job, columns, now)
                    starts[job_id] = self._names(columns)
                elif running.columns != columns:
                    running.columns = columns
                    moves[job_id] = self._names(columns)
        return Changes(starts, moves, decision.wake_at)

    def regroup(self, predictions: Mapping[int, float], now: float) -> Layout:
        """Slot homogeneity, where the policy has rows to regroup."""
        if isinstance(self._policy, MatrixPolicy):
            self._policy.homogenize(predictions, now)
            self._read_layout()
        return self.layout

    def set_migration_cost(self, seconds: float) -> None:
        if isinstance(self._policy, MatrixPolicy):
            self._policy.set_migration_cost(seconds)
        self.choice = dataclasses.replace(self.choice, migration_cost_s=seconds)

    def _build(self, procs: int) -> LivePolicy:
        return build_policy(self.choice, procs, self._longest_estimate)

    def _read_layout(self) -> None:
        self.layout = self._policy.layout()
        self.rows = [
            {name: job_id for job_id, columns in row.items() for name in self._names(columns)}
            for row in self.layout
        ]

    def _names(self, columns: int) -> list[str]:
        return [self.nodes[column] for column in column_list(columns)]

