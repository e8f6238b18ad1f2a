"""Slack-based priority backfilling (Talby & Feitelson 1999; docs/policies.md).

Every queued job has a slack: how much later than planned it may still be
made to start. A new job may push queued jobs back within their slack when
that buys enough: each way of fitting it in is priced, and the cheapest is
taken.

Inserting a job ``j`` tries, besides what conservative backfilling would do
(``j`` in the first hole, nobody moved), each step of the profile ``ts`` before
that hole where ``j`` fits once the jobs planned from ``ts`` on are pushed back
by ``j``'s estimate; the pushed-back jobs are then compressed one by one, in
the order a heuristic gives (AST, AAT, DU, DC or DP). The price of a schedule
is the new job's wait plus the cost of every move:

    price = (te - now)^αt · n^αu + Σ n_i^αu · t_i^αt · (p_i / p_j)^αp · (s0_i / s_i)^αf

infinite if any move ``t_i`` exceeds its job's slack ``s_i``; ties go to the
schedule that moves fewer jobs. Later steps than the conservative hole are not
tried: there the new job waits longer and no queued job needs to make way.
When a job ends before its estimate (or leaves the queue), the same search
runs with a job of no size and no length, so queued jobs move up where that
earns the most (moving up has a negative cost).

Invariant: no queued job ever starts later than its planned start plus its
initial slack.
"""

import math
from collections.abc import Callable
from dataclasses import dataclass, field

from gangsched.policy.backfill import Plan, PlanningPolicy, compress
from gangsched.policy.interface import Job
from gangsched.policy.profile import Profile
from gangsched.policy.slack_settings import Heuristic, SlackSettings
from gangsched.policy.topology import Topology

_LOWEST_PRIORITY = 0.01  # a floor for ratios of priorities
# s0 / s, the share of slack used, is read as (s0 + 1 s) / (s + 1 s): 1 while nothing is used,
# growing as the slack runs out, and 1 (not 0) for a job that never had slack, so that moving
# such a job up still earns what its size, time and priority are worth
_SLACK_SMOOTHING_S = 1.0


@dataclass
class SlackPlan(Plan):
    priority: float = 0.5
    initial_slack: float = 0.0
    slack: float = 0.0


@dataclass(frozen=True)
class _Newcomer:
    """What the price of a schedule needs to know of the job it is made for."""

    procs: int
    estimate: float
    priority: float


@dataclass
class _Trial:
    profile: Profile
    starts: dict[int, float] = field(default_factory=dict)  # moved job -> new start
    price: float = 0.0


class SlackPolicy(PlanningPolicy[SlackPlan]):
    name = "slack"

    def __init__(self, procs: int, settings: SlackSettings | None = None, topology: Topology | None = None) -> None:
        super().__init__(procs, topology)
        self.settings = settings or SlackSettings()

    def submit(self, job: Job, now: float) -> None:
        self.profile.advance(now)
        priority = self._priority(job, 0.5)
        newcomer = _Newcomer(job.procs, job.estimate, priority)
        start = self.profile.earliest(job.procs, job.estimate, now)
        best = _Trial(self.profile.copy(), price=self._wait_price(newcomer, start - now))
        best.profile.reserve(job.procs, start, start + job.estimate)
        for slot in self._slots(now, start):
            trial = self._insert_at(newcomer, slot, now)
            if trial is not None and _better(trial, best):
                best, start = trial, slot
        self._commit(best)
        # SP reflects the wait this placement gives; priority and slack are set once, without replanning
        scheduler_priority = min((start - now) / (2 * self.settings.average_wait_s), 1.0)
        plan = SlackPlan(job, start, priority=self._priority(job, scheduler_priority))
        plan.initial_slack = plan.slack = self._initial_slack(job, plan.priority)
        self.planned[job.job_id] = plan

    def reorder(self, now: float) -> None:
        """Slack keeps its own prices (user, political and scheduler priority): the multifactor
        priority does not reorder it."""

    def _replan(self, now: float) -> None:
        nobody = _Newcomer(0, 0.0, self._priority_of(0.0, 0.0, 0.5))
        best = _Trial(self.profile)
        for slot in self._slots(now, math.inf):
            trial = self._insert_at(nobody, slot, now)
            if trial is not None and _better(trial, best):
                best = trial
        self._commit(best)

    def _slots(self, now: float, before: float) -> list[float]:
        """Where the plan can change before ``before``: the profile's steps and the planned starts."""
        steps = {max(time, now) for time in self.profile.times}
        steps.update(plan.start for plan in self.planned.values())
        return sorted(time for time in steps if time < before)

    def _insert_at(self, newcomer: _Newcomer, slot: float, now: float) -> _Trial | None:
        """The schedule with the newcomer at ``slot`` and the jobs planned from there pushed back and compressed."""
        profile = self.profile.copy()
        pushed = [plan for plan in self.planned.values() if plan.start >= slot and plan.start > now]
        for plan in pushed:
            profile.release(plan.job.procs, plan.start, plan.end)
        end = slot + newcomer.estimate
        if not profile.fits(newcomer.procs, slot, end):
            return None
        profile.reserve(newcomer.procs, slot, end)
        moved = [SlackPlan(plan.job, plan.start + newcomer.estimate) for plan in pushed]
        for plan in moved:
            profile.reserve(plan.job.procs, plan.start, plan.end)
        order = self._order(pushed, newcomer)
        by_id = {plan.job.job_id: plan for plan in moved}
        compress(profile, [by_id[plan.job.job_id] for plan in order], now)
        trial = _Trial(profile, price=self._wait_price(newcomer, slot - now))
        for old in pushed:
            delay = by_id[old.job.job_id].start - old.start
            if delay > old.slack:
                return None
            if delay != 0:
                trial.starts[old.job.job_id] = old.start + delay
                trial.price += self._cost(old, delay, newcomer)
        return trial

    def _commit(self, trial: _Trial) -> None:
        self.profile = trial.profile
        for job_id, start in trial.starts.items():
            plan = self.planned[job_id]
            plan.slack -= start - plan.start
            plan.start = start

    def _order(self, plans: list[SlackPlan], newcomer: _Newcomer) -> list[SlackPlan]:
        keys: dict[Heuristic, Callable[[SlackPlan], tuple[float, ...]]] = {
            Heuristic.AST: lambda plan: (plan.start, plan.job.submit, plan.job.job_id),
            Heuristic.AAT: lambda plan: (plan.job.submit, plan.job.job_id),
            Heuristic.DU: lambda plan: (-plan.job.procs * plan.job.estimate, plan.job.job_id),
            Heuristic.DC: lambda plan: (-self._cost(plan, 1.0, newcomer), plan.job.job_id),
            Heuristic.DP: lambda plan: (-plan.priority, plan.job.submit, plan.job.job_id),
        }
        return sorted(plans, key=keys[self.settings.heuristic])

    def _wait_price(self, newcomer: _Newcomer, wait: float) -> float:
        settings = self.settings
        return float(_power(wait, settings.time_weight) * newcomer.procs ** settings.utilization_weight)

    def _cost(self, plan: SlackPlan, delay: float, newcomer: _Newcomer) -> float:
        settings = self.settings
        priorities = max(plan.priority, _LOWEST_PRIORITY) / max(newcomer.priority, _LOWEST_PRIORITY)
        used = 1.0 if math.isinf(plan.initial_slack) else (
            (plan.initial_slack + _SLACK_SMOOTHING_S) / (plan.slack + _SLACK_SMOOTHING_S))
        return float(plan.job.procs ** settings.utilization_weight * _power(delay, settings.time_weight)
                * priorities ** settings.priority_weight * used ** settings.fairness_weight)

    def _priority(self, job: Job, scheduler_priority: float) -> float:
        return self._priority_of(job.user_priority, job.political_priority, scheduler_priority)

    @staticmethod
    def _priority_of(user: float, political: float, scheduler: float) -> float:
        return (user + political + scheduler) / 3

    def _initial_slack(self, job: Job, priority: float) -> float:
        if job.political_priority <= -1:  # over quota: may wait behind everybody
            return math.inf
        return (1 - priority) * self.settings.slack_factor * self.settings.average_wait_s


def _power(value: float, exponent: float) -> float:
    """``value ** exponent`` keeping the sign, so that moving a job up earns a negative cost."""
    return math.copysign(abs(value) ** exponent, value)


def _better(trial: _Trial, best: _Trial) -> bool:
    return (trial.price, len(trial.starts)) < (best.price, len(best.starts))
