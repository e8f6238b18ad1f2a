"""The event loop: arrivals, completions, and the policy's decisions, on virtual time.

A policy sees each arrival and completion, and after every batch of events at
one instant says which jobs run at what rate: 1.0 for a job that has its
processors to itself, less for a job that time-shares them (gang scheduling).
Only jobs whose rate changes are named. A job's work is its dedicated run time;
it ends when that work is done at the rates it was given.

At one instant, completions are handled before arrivals (a job ending at t
frees its processors for a job arriving at t), arrivals in trace order.
Deterministic: no iteration over sets, ties broken by job id.
"""

import heapq
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol

from gangsched.sim.jobs import SimJob

_EPSILON = 1e-9


class Policy(Protocol):
    def submit(self, job: SimJob, now: float) -> None: ...

    def finish(self, job: SimJob, now: float) -> None: ...

    def schedule(self, now: float) -> Mapping[int, float]:
        """Jobs whose rate is new or changed, by id; a rate of 0 suspends a job."""
        ...


@dataclass
class _Progress:
    job: SimJob
    rate: float = 0.0
    done: float = 0.0  # work done up to ``since``
    since: float = 0.0
    version: int = 0


def simulate(jobs: list[SimJob], policy: Policy, progress: Callable[[int], None] | None = None) -> None:
    """Run ``jobs`` (sorted by submit time) under ``policy``; fills in their start and end."""
    pending = sorted(jobs, key=lambda job: (job.submit, job.job_id))
    by_id = {job.job_id: job for job in pending}
    running: dict[int, _Progress] = {}
    completions: list[tuple[float, int, int]] = []  # (end, job id, version)
    next_arrival = 0
    while next_arrival < len(pending) or completions:
        arrival_time = pending[next_arrival].submit if next_arrival < len(pending) else float("inf")
        now = min(arrival_time, completions[0][0] if completions else float("inf"))
        while completions and completions[0][0] <= now + _EPSILON:
            _, job_id, version = heapq.heappop(completions)
            state = running.get(job_id)
            if state is None or state.version != version:
                continue  # superseded by a change of rate
            del running[job_id]
            state.job.end = now
            policy.finish(state.job, now)
            if progress:
                progress(1)
        while next_arrival < len(pending) and pending[next_arrival].submit <= now:
            policy.submit(pending[next_arrival], now)
            next_arrival += 1
        for job_id, rate in policy.schedule(now).items():
            state = running.get(job_id)
            if state is None:
                job = by_id[job_id]
                job.start = now
                state = running[job_id] = _Progress(job, since=now)
            state.done += state.rate * (now - state.since)
            state.since, state.rate = now, rate
            state.version += 1
            if rate > 0:
                end = now + max(0.0, state.job.run_time - state.done) / rate
                heapq.heappush(completions, (end, job_id, state.version))
