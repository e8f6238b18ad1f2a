"""One simulation from a policy's name and parameters: what `gang sim`, its sweeps and the
experiments S1-S6 all run.

A run is described by a ``Choice`` (policy/catalog.py).
"""

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from gangsched.policy.catalog import Choice, build_policy
from gangsched.sim.engine import simulate
from gangsched.sim.sim_job import SimJob
from gangsched.sim.metrics import Summary, summarize

if TYPE_CHECKING:  # the quantum-by-quantum simulator loads only when asked for (`gang sim` starts faster)
    from gangsched.sim.quanta import Quanta


@dataclass(frozen=True)
class Outcome:
    choice: Choice
    summary: Summary
    average_slots: float | None = None  # matrix policies only
    migrations: int | None = None
    migrated_tasks: int | None = None


def run(choice: Choice, jobs: list[SimJob], procs: int, progress: Callable[[int], None] | None = None) -> Outcome:
    """Simulate ``jobs`` (copied: the caller's are left as they were) and summarize the schedule."""
    return run_keeping_jobs(choice, [copy.copy(job) for job in jobs], procs, progress)[0]


def run_keeping_jobs(choice: Choice, jobs: list[SimJob], procs: int, progress: Callable[[int], None] | None = None,
                     quanta: "Quanta | None" = None) -> tuple[Outcome, list[SimJob]]:
    """As ``run``, on ``jobs`` themselves: their start and end are filled in, and they come back with the
    outcome (for per-job CSV and SWF output). A trace's jobs are scheduled once, so they are not copied
    (a copy each is a tenth of a second per 30,000 jobs).

    With ``quanta``, quantum by quantum (sim/quanta.py: paired gang scheduling, the CPU the jobs use);
    otherwise in the fluid view of sim/engine.py.
    """
    policy = build_policy(choice, procs, max((job.estimate for job in jobs), default=0.0))
    if quanta is None:
        totals = simulate(jobs, policy, progress)
    else:
        from gangsched.sim.quanta import simulate_quanta

        totals = simulate_quanta(jobs, policy, procs, quanta, progress)
    outcome = Outcome(choice, summarize(jobs, procs, totals))
    shared = policy.time_sharing()
    if shared is not None:
        outcome = dataclasses.replace(outcome, average_slots=shared.average_slots, migrations=shared.migrations,
                                      migrated_tasks=shared.migrated_tasks)
    return outcome, jobs


def prioritize(jobs: list[SimJob], every: int, priority: float = 1.0) -> list[SimJob]:
    """Every ``every``-th job gets user and political priority ``priority``, the others 0
    (Talby & Feitelson 1999, §3.3)."""
    return [dataclasses.replace(job, user_priority=priority, political_priority=priority)
            if index % every == every - 1 else job for index, job in enumerate(jobs)]
