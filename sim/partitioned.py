"""Partitions in the simulator: one machine divided into partitions, each a policy of its own over
its nodes (the same ``LiveScheduler`` the master runs, in node names), in priority tiers that
preempt each other by the rules the master follows (policy/tiers.py). To the event engine
(sim/engine.py) it is one policy.

A job of a lower tier that gives way is suspended: out of its partition's
policy, its rate 0, its work kept; it resumes, adopted back where it ran,
once no higher-tier job runs on its nodes and its matrix has room for it. The simulator models suspension
only: a partition whose gangs would be requeued or cancelled is refused.
The machine's nodes have no memory limit, as the simulator's always have.
Reservations hold nodes in windows of time as in the master (policy/windows.py):
no job is placed where it would still run when a window opens; no job of a
trace names one, so they are maintenance windows here.
"""

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from gangsched.policy.catalog import Choice
from gangsched.policy.interface import Decision, Job, TimeSharing
from gangsched.policy.live_scheduler import LiveScheduler, NodeShape, Processor
from gangsched.policy.partitions import Partition, PreemptMode
from gangsched.policy.tiers import Gang, giving_way, on_nodes, seen_nodes
from gangsched.policy.windows import Reservation

_ROUNDS = 8
_UNLIMITED = 1 << 62  # the simulated nodes' memory: never a limit


@dataclass
class _Placed:
    job: Job
    partition: str
    processors: list[Processor]
    started: float
    suspended: bool = False
    nodes: dict[str, int] = dataclasses.field(init=False)  # node -> 0, the memory it commits: the tier rules' view

    def __post_init__(self) -> None:
        self.move(self.processors)

    def move(self, processors: list[Processor]) -> None:
        self.processors = processors
        self.nodes = {processor.node: 0 for processor in processors}  # made once, not at every preemption


class PartitionedPolicy:
    """``partitions``: each with the choice of its policy; ``nodes``: the machine's nodes, in order, each with
    its processors; ``partition_of``: a job's partition's name; ``reservations``: on the simulated clock."""

    def __init__(self, partitions: list[tuple[Partition, Choice]], nodes: Mapping[str, int], longest_estimate: float,
                 partition_of: Callable[[Job], str], reservations: tuple[Reservation, ...] = ()) -> None:
        modes = {partition.name: partition.preempt_mode for partition, _ in partitions}
        refused = [name for name, mode in modes.items() if mode in (PreemptMode.REQUEUE, PreemptMode.CANCEL)]
        if refused:
            raise ValueError(f"partition {refused[0]}: the simulator suspends preempted gangs (suspend or off), "
                             "it does not requeue or cancel them")
        self.name = "+".join(f"{partition.name}:{choice.policy}" for partition, choice in partitions)
        self._partitions = {partition.name: partition for partition, _ in partitions}
        self._schedulers = {partition.name: LiveScheduler(choice, longest_estimate) for partition, choice in partitions}
        self._by_tier = sorted(self._partitions.values(), key=lambda partition: -partition.priority_tier)
        self._shapes = {partition.name: {node: NodeShape(processors, _UNLIMITED) for node, processors in nodes.items()
                                         if partition.holds(node)} for partition, _ in partitions}
        self._partition_of = partition_of
        self._reservations = {name: tuple(each for each in reservations if any(partition.holds(node)
                                                                               for node in each.nodes))
                              for name, partition in self._partitions.items()}
        self._placed: dict[int, _Placed] = {}
        self._rates: dict[int, float] = {}  # what the engine was last told of each running job
        self._moved = True  # a job started, ended or moved since the tier rules were last applied
        self._follow(0.0)

    def submit(self, job: Job, now: float) -> None:
        self._schedulers[self._partition_of(job)].submit(job, now)

    def reorder(self, now: float) -> None:
        for scheduler in self._schedulers.values():
            scheduler.reorder(now)

    def finish(self, job: Job, now: float) -> None:
        placed = self._placed.pop(job.job_id)
        self._rates.pop(job.job_id, None)
        self._moved = True
        if not placed.suspended:
            self._schedulers[placed.partition].finish(job.job_id, now)

    def schedule(self, now: float) -> Decision:
        """Each partition decides, highest tier first, each seeing what the ones above placed; the gangs
        their jobs displace are suspended, and those no longer displaced resume."""
        rates: dict[int, float] = {}
        extra: dict[int, float] = {}
        wake_at: float | None = None
        for _ in range(_ROUNDS):
            changed = False
            for partition in self._by_tier:
                changes = self._schedulers[partition.name].schedule(now)
                for job_id, processors in changes.starts.items():
                    job = self._schedulers[partition.name].running_job(job_id)
                    self._placed[job_id] = _Placed(job, partition.name, processors, now)
                for job_id, processors in changes.moves.items():
                    self._placed[job_id].move(processors)
                self._moved |= bool(changes.starts or changes.moves)
                rates.update(changes.decision.rates)
                extra.update(changes.decision.extra_work)
                if changes.wake_at is not None:
                    wake_at = changes.wake_at if wake_at is None else min(wake_at, changes.wake_at)
                changed |= self._follow(now)
            if not changed:
                break
        for job_id, placed in self._placed.items():
            if placed.suspended:
                rates[job_id] = 0.0
        told = {job_id: rate for job_id, rate in rates.items() if self._rates.get(job_id) != rate}
        self._rates.update(told)
        return Decision(rates=told, extra_work=extra, wake_at=wake_at)

    def time_sharing(self) -> TimeSharing | None:
        return None

    def _follow(self, now: float) -> bool:
        """Suspend and resume as the gangs placed now say; rebuild each partition whose nodes changed.
        Whether anything changed (nothing can have, if no job started, ended or moved)."""
        if not self._moved:
            return False
        self._moved = False
        gangs = [Gang(job_id, self._partitions[placed.partition].priority_tier,
                      self._partitions[placed.partition].preempt_mode, placed.suspended,
                      placed.nodes, len(placed.processors))
                 for job_id, placed in self._placed.items()]
        decided = giving_way(gangs)
        for job_id in decided.preempted:
            placed = self._placed[job_id]
            placed.suspended = True
            self._schedulers[placed.partition].finish(job_id, now)
        resumed = [job_id for job_id in decided.resumed  # once its matrix has room for it
                   if self._schedulers[self._placed[job_id].partition].has_room(self._placed[job_id].processors)]
        for job_id in resumed:
            self._placed[job_id].suspended = False
        flipped = {*decided.preempted, *resumed}
        placed_on = on_nodes([dataclasses.replace(gang, suspended=not gang.suspended) if gang.job_id in flipped
                              else gang for gang in gangs])
        changed = bool(flipped)
        for name, partition in self._partitions.items():
            view = seen_nodes(partition.priority_tier, self._shapes[name], placed_on)
            back = [placed for job_id, placed in self._placed.items() if job_id in resumed and placed.partition == name]
            scheduler, booked = self._schedulers[name], self._reservations[name]
            if list(view.items()) == list(scheduler.node_shapes().items()) and not back \
                    and booked == scheduler.reservations:
                continue
            scheduler.rebuild(view, now, [(placed.job, placed.processors, placed.started) for placed in back],
                              reservations=booked)
            changed = True
        return changed
