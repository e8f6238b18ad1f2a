"""The event loop: arrivals, completions, and the policy's decisions, on virtual time.

A job's work is its dedicated run time plus whatever the policy charged it
(migration); it ends when that work is done at the rates the policy gave it.
At one instant, completions are handled before arrivals (a job ending at t
frees its processors for a job arriving at t), arrivals in trace order.
Deterministic: no iteration over sets, ties broken by job id.

With ``priorities`` (sim/fair_share.py) the running jobs' use is charged at
every event, each arrival is given its priority before the policy hears of
it, and at the first event of each period every waiting job's priority is
recomputed and the policy reorders its queues before it decides.
"""

import heapq
import math
from collections.abc import Callable
from dataclasses import dataclass
from operator import attrgetter

from gangsched.policy.interface import Policy
from gangsched.sim.fair_share import SimPriorities
from gangsched.sim.sim_job import SimJob

_EPSILON = 1e-9


@dataclass
class RunTotals:
    """Integrals over the run that the job records alone cannot give."""

    waiting_seconds: float = 0.0  # time during which some job waited
    busy_while_waiting: float = 0.0  # ∫ Σ rate · procs over that time: processors doing work


@dataclass
class _Progress:
    job: SimJob
    work: float
    rate: float = 0.0
    done: float = 0.0  # work done up to ``since``
    since: float = 0.0
    version: int = 0


def simulate(jobs: list[SimJob], policy: Policy, progress: Callable[[int], None] | None = None,
             priorities: SimPriorities | None = None) -> RunTotals:
    """Run ``jobs`` under ``policy``; fills in their start and end."""
    pending = sorted(jobs, key=attrgetter("submit", "job_id"))
    by_id = {job.job_id: job for job in pending}
    running: dict[int, _Progress] = {}
    completions: list[tuple[float, int, int]] = []  # (end, job id, version)
    next_arrival = 0
    wake_at = math.inf
    totals = RunTotals()
    waiting = 0  # submitted, not started
    busy = 0.0  # Σ rate · procs of the running jobs
    last = 0.0
    while next_arrival < len(pending) or completions or wake_at < math.inf:
        arrival_time = pending[next_arrival].submit if next_arrival < len(pending) else math.inf
        now = min(arrival_time, completions[0][0] if completions else math.inf, wake_at)
        if waiting:
            totals.waiting_seconds += now - last
            totals.busy_while_waiting += busy * (now - last)
        if priorities is not None:
            for charged in running.values():
                priorities.charge(charged.job, charged.rate * charged.job.procs * (now - last), now)
        last = now
        while completions and completions[0][0] <= now + _EPSILON:
            _, job_id, version = heapq.heappop(completions)
            state = running.get(job_id)
            if state is None or state.version != version:
                continue  # superseded by a change of rate
            del running[job_id]
            busy -= state.rate * state.job.procs
            state.job.end = now
            policy.finish(state.job, now)
            if progress:
                progress(1)
        while next_arrival < len(pending) and pending[next_arrival].submit <= now:
            if priorities is not None:
                priorities.arrive(pending[next_arrival], now)
            policy.submit(pending[next_arrival], now)
            next_arrival += 1
            waiting += 1
        if priorities is not None and priorities.due(now):
            priorities.recompute(now)
            policy.reorder(now)
        decision = policy.schedule(now)
        wake_at = math.inf if decision.wake_at is None else max(decision.wake_at, now)
        changed = decision.rates.keys() | decision.extra_work.keys() if decision.extra_work else decision.rates
        for job_id in sorted(changed):
            state = running.get(job_id)
            if state is None:
                job = by_id[job_id]
                job.start = now
                state = running[job_id] = _Progress(job, work=job.run_time, since=now)
                if priorities is not None:
                    priorities.started(job)
                waiting -= 1
            state.work += decision.extra_work.get(job_id, 0.0)
            rate = decision.rates.get(job_id, state.rate)
            busy += (rate - state.rate) * state.job.procs
            state.done += state.rate * (now - state.since)
            state.since, state.rate = now, rate
            state.version += 1
            if rate > 0:
                end = now + max(0.0, state.work - state.done) / rate
                heapq.heappush(completions, (end, job_id, state.version))
    return totals
