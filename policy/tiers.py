"""Preemption between partitions of different priority tiers over the same nodes, as rules over data
(docs/policies.md, "Preemption"): which gangs give way and which resume, and which nodes each
partition's matrix sees, with what memory and in which order. The master (master/tiers.py) and
the simulator's partitions (sim/partitioned.py) both decide with these.

A node runs the jobs of one tier at a time: the highest whose gangs run on
it (suspended ones aside). A gang with a task on a node where a higher tier
runs gives way whole; a suspended gang none of whose nodes has one resumes.
"""

from collections.abc import Mapping
from dataclasses import dataclass, field

from gangsched.policy.live_scheduler import NodeShape
from gangsched.policy.partitions import PreemptMode, preemption_order


@dataclass(frozen=True)
class Gang:
    """A running job (suspended or not) as the tier rules see it."""

    job_id: int
    tier: int  # its partition's
    mode: PreemptMode  # how its partition's gangs give way
    suspended: bool
    memory: Mapping[str, int]  # node -> the bytes it commits there: its nodes
    tasks: int
    held: bool = False  # suspended by an administrator: these rules never resume it

    @property
    def nodes(self) -> list[str]:
        return list(self.memory)


@dataclass(frozen=True)
class GivingWay:
    preempted: dict[int, int] = field(default_factory=dict)  # gang -> the higher-tier job that displaces it
    resumed: list[int] = field(default_factory=list)


def on_nodes(gangs: list[Gang]) -> dict[str, list[Gang]]:
    """Node -> the gangs with a task there."""
    found: dict[str, list[Gang]] = {}
    for gang in gangs:
        for node in gang.nodes:
            found.setdefault(node, []).append(gang)
    return found


def giving_way(gangs: list[Gang]) -> GivingWay:
    """Which gangs give way now (to the lowest-numbered job of the highest tier running on one of their
    nodes), and which suspended gangs resume."""
    top: dict[str, tuple[int, int]] = {}  # node -> the highest tier running there, and minus its lowest job id
    for gang in gangs:
        if not gang.suspended:
            for node in gang.nodes:
                top[node] = max(top.get(node, (-1, 0)), (gang.tier, -gang.job_id))
    result = GivingWay()
    for gang in sorted(gangs, key=lambda gang: gang.job_id):
        above = [top[node] for node in gang.nodes if node in top and top[node][0] > gang.tier]
        if above and not gang.suspended:
            result.preempted[gang.job_id] = -max(above)[1]
        elif not above and gang.suspended and not gang.held:
            result.resumed.append(gang.job_id)
    return result


def seen_nodes(tier: int, nodes: Mapping[str, NodeShape], placed: Mapping[str, list[Gang]]) -> dict[str, NodeShape]:
    """The nodes a matrix of ``tier`` sees of its partition's ``nodes`` up, with the memory its jobs may
    commit there, in the order its policy is to fill them: none where a higher tier runs, or a lower
    tier's gang that may not be preempted (``off``); the memory that suspended gangs keep there, its
    own among them (they are out of its policy while suspended), and that lower-tier gangs would keep
    if suspended, taken off; those where a job of its would preempt the fewest and smallest gangs
    first (``preemption_order``)."""
    lower_gangs: dict[str, list[int]] = {}
    seen: dict[str, NodeShape] = {}
    for name, shape in nodes.items():
        kept, lower, open_ = 0, [], True  # one pass over the node's gangs: partitions ask at every preemption
        for gang in placed.get(name, ()):
            if gang.suspended:
                kept += gang.memory[name]
            elif gang.tier > tier or (gang.tier < tier and gang.mode is PreemptMode.OFF):
                open_ = False
                break
            elif gang.tier < tier:
                lower.append(gang.tasks)
                if gang.mode is PreemptMode.SUSPEND:
                    kept += gang.memory[name]
        if open_:
            seen[name] = NodeShape(shape.processors, max(0, shape.memory - kept))
            lower_gangs[name] = lower
    return {name: seen[name] for name in preemption_order(lower_gangs)}
