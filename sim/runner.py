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
from gangsched.policy.interface import Policy
from gangsched.policy.topology import Topology
from gangsched.sim.engine import simulate
from gangsched.sim.fair_share import FairShareSettings, SimPriorities
from gangsched.sim.memory_audit import MemoryAudit
from gangsched.sim.metrics import Summary, summarize
from gangsched.sim.sim_job import SimJob

if TYPE_CHECKING:  # the quantum-by-quantum simulator loads only when asked for (`gang sim` starts faster)
    from gangsched.sim.quanta import Quanta


@dataclass(frozen=True)
class Outcome:
    choice: Choice
    summary: Summary
    average_slots: float | None = None  # matrix policies only
    migrations: int | None = None
    migrated_tasks: int | None = None
    memory_events: int | None = None  # with a memory audit: the scheduling events it checked
    memory_peak: float | None = None  # ... and the most any node was committed, as a fraction of its memory


def run(choice: Choice, jobs: list[SimJob], procs: int, progress: Callable[[int], None] | None = None) -> Outcome:
    """Simulate ``jobs`` (copied: the caller's are left as they were) and summarize the schedule."""
    return run_keeping_jobs(choice, [copy.copy(job) for job in jobs], procs, progress)[0]


def run_keeping_jobs(choice: Choice, jobs: list[SimJob], procs: int, progress: Callable[[int], None] | None = None,
                     quanta: "Quanta | None" = None, audit_memory: bool = False,
                     fair_share: FairShareSettings | None = None) -> tuple[Outcome, list[SimJob]]:
    """As ``run``, on ``jobs`` themselves: their start and end are filled in, and they come back with the
    outcome (for per-job CSV and SWF output). A trace's jobs are scheduled once, so they are not copied
    (a copy each is a tenth of a second per 30,000 jobs).

    With ``quanta``, quantum by quantum (sim/quanta.py: paired gang scheduling, the CPU the jobs use);
    otherwise in the fluid view of sim/engine.py. With ``audit_memory`` (and a machine with memory), every
    scheduling event is checked for a node committed beyond its memory (sim/memory_audit.py). With
    ``fair_share``, the queues in multifactor priority order (sim/fair_share.py).
    """
    if fair_share is not None and quanta is not None:
        raise ValueError("priorities are simulated in the fluid view only, not quantum by quantum")
    built = build_policy(choice, procs, max((job.estimate for job in jobs), default=0.0))
    policy: Policy = built
    audit = None
    if audit_memory and choice.memory_per_node is not None:
        policy = audit = MemoryAudit(built, Topology.uniform(procs, 1, choice.memory_per_node))
    if quanta is None:
        priorities = None if fair_share is None else SimPriorities(jobs, fair_share, procs)
        totals = simulate(jobs, policy, progress, priorities)
    else:
        from gangsched.sim.quanta import simulate_quanta

        totals = simulate_quanta(jobs, built, procs, quanta, progress)
    outcome = Outcome(choice, summarize(jobs, procs, totals))
    if audit is not None:
        outcome = dataclasses.replace(outcome, memory_events=audit.events, memory_peak=audit.peak_fraction)
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
