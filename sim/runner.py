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
from gangsched.sim.jobs import SimJob
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
    return run_keeping_jobs(choice, jobs, procs, progress)[0]


def run_keeping_jobs(choice: Choice, jobs: list[SimJob], procs: int, progress: Callable[[int], None] | None = None,
                     quanta: "Quanta | None" = None) -> tuple[Outcome, list[SimJob]]:
    """As ``run``, and the scheduled jobs too (for per-job CSV and SWF output).

    With ``quanta``, quantum by quantum (sim/quanta.py: paired gang scheduling, the CPU the jobs use);
    otherwise in the fluid view of sim/engine.py.
    """
    scheduled = [copy.copy(job) for job in jobs]  # the caller's were validated: no need to build them again
    policy = build_policy(choice, procs, max((job.estimate for job in scheduled), default=0.0))
    if quanta is None:
        totals = simulate(scheduled, policy, progress)
    else:
        from gangsched.sim.quanta import simulate_quanta

        totals = simulate_quanta(scheduled, policy, procs, quanta, progress)
    outcome = Outcome(choice, summarize(scheduled, procs, totals))
    shared = policy.time_sharing()
    if shared is not None:
        outcome = dataclasses.replace(outcome, average_slots=shared.average_slots, migrations=shared.migrations,
                                      migrated_tasks=shared.migrated_tasks)
    return outcome, scheduled


def prioritize(jobs: list[SimJob], every: int, priority: float = 1.0) -> list[SimJob]:
    """Every ``every``-th job gets user and political priority ``priority``, the others 0
    (Talby & Feitelson 1999, §3.3)."""
    return [dataclasses.replace(job, user_priority=priority, political_priority=priority)
            if index % every == every - 1 else job for index, job in enumerate(jobs)]
