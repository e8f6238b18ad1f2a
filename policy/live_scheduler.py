"""A batch policy in node names: the simulator's policy code as the master runs it over the nodes
up (and as the simulator runs it over each partition's nodes).

A policy sees processors 0..N-1; here the columns are the processors of the
nodes up, node by node in the order given (by name: node1's processors, then
node2's, ...; where partitions of different tiers share nodes, those a job
would preempt least first: policy/tiers.py),
and the policy's topology says which columns share a node. A job's rank r
runs on its r-th column, so ranks on one node are consecutive (block
distribution). When the set of nodes up changes, the policy is rebuilt for the new
set: running jobs are adopted on their nodes and waiting ones submitted again
in their order, so reservations and slack are planned anew (a node joining or
leaving is rare). A job withdrawn while it waits leaves the policy's queue
and gives up what it held there (``withdraw``); the running jobs stay where
they are. A waiting job wider than the nodes up is held back from the policy
until enough nodes are up. Nodes may be closed (drained): the policy keeps
their running jobs and places nothing new there (policy/topology.py); and
reservations hold nodes for their jobs in windows of time
(policy/windows.py), which a job submitted to one names.
"""

import dataclasses
import functools
import operator
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import NamedTuple

from gangsched.policy.catalog import Choice, build_policy
from gangsched.policy.columns import Layout, column_list, mask_of
from gangsched.policy.interface import Decision, Job, LivePolicy
from gangsched.policy.memory import NO_MEMORY, MemoryBook, MemoryRequest
from gangsched.policy.topology import Topology
from gangsched.policy.windows import Reservation, Window, Windows


class NodeShape(NamedTuple):
    """What a node up offers: its processors and the bytes of memory its jobs may commit."""

    processors: int
    memory: int


class Processor(NamedTuple):
    """One column of the matrix: a processor of a node."""

    node: str
    number: int  # 0 .. the node's processors - 1


@dataclass
class PolicyJob:
    """A master job as a policy sees it (policy/interface.py ``Job``)."""

    job_id: int
    submit: float
    procs: int
    estimate: float
    nodes: int | None = None
    tasks_per_node: int | None = None
    cpus_per_task: int = 1
    user_priority: float = 0.0
    political_priority: float = 0.0
    migratable: bool = False
    memory: MemoryRequest = NO_MEMORY
    user: str = ""
    priority: float = 0.0  # written by the master's priorities only (policy/priority_order.py)


@dataclass(frozen=True)
class Changes:
    starts: dict[int, list[Processor]]  # job id -> its processors, rank r on the r-th
    moves: dict[int, list[Processor]]  # running job -> the processors it migrates to
    wake_at: float | None  # when the policy wants to decide again
    decision: Decision  # the policy's own: the rates it changed and the work migrations cost (the simulator's)


@dataclass
class _Running:
    job: Job
    columns: int
    started: float


class LiveScheduler:
    def __init__(self, choice: Choice, longest_estimate: float, grace_s: float = 0.0) -> None:
        """``grace_s``: how long past its time limit a job may run before it is killed."""
        self.choice = choice
        self._longest_estimate = longest_estimate
        self._grace_s = grace_s
        self.nodes: list[str] = []
        self.closed: frozenset[str] = frozenset()  # nodes up that take no new job
        self.reservations: tuple[Reservation, ...] = ()
        self._members: dict[int, tuple[Job, str]] = {}  # waiting jobs of reservations, and which, in order
        self._decided_at = 0.0  # when the policy last decided
        self.columns: list[Processor] = []
        self._column_of: dict[Processor, int] = {}  # each processor's column
        self.topology = Topology(())
        self._shapes: dict[str, NodeShape] = {}  # the nodes as the topology has them: asked at every preemption
        self.layout: Layout = []
        self._rows: list[dict[Processor, int]] | None = []  # ``rows``, once read for the layout
        self._taken: list[int] | None = []  # ``_taken_by_row``, once asked for the layout
        self._policy: LivePolicy = self._build()
        self._waiting: dict[int, Job] = {}  # submitted to the policy, in order
        self._held: dict[int, Job] = {}  # wider than the nodes up
        self._running: dict[int, _Running] = {}

    @property
    def name(self) -> str:
        return self._policy.name

    def processors_of(self, job_id: int) -> list[Processor]:
        running = self._running.get(job_id)
        return [] if running is None else self._names(running.columns)

    def has_room(self, processors: list[Processor]) -> bool:
        """Whether a gang on ``processors`` (a suspended one, to resume) would fit: a row holds them free, or
        the policy has rows to spare below its MPL. A resumed gang waits for that, rather than open a row
        past the MPL (its matrix used its processors while it was out)."""
        index = self._column_of
        # processors it does not see now (their nodes come back with the gang) hold nothing of its
        wanted = mask_of(index[processor] for processor in processors if processor in index)
        if any(not wanted & taken for taken in self._taken_by_row()):
            return True
        return self._policy.time_sharing() is not None and len(self.layout) < self.choice.mpl

    def running_job(self, job_id: int) -> Job:
        """A job the policy placed, as it was submitted."""
        return self._running[job_id].job

    def nodes_of(self, job_id: int) -> set[str]:
        return {processor.node for processor in self.processors_of(job_id)}

    def could_ever_fit(self, job: Job) -> bool:
        """Whether the nodes up and not drained hold ``job`` once they are empty (its memory too), whatever
        windows of reservations hold them for a while."""
        every = (1 << self.topology.width) - 1
        topology = self.topology.without_windows()
        return topology.fits(MemoryBook(topology).usable(job, every), job)

    def window_in_the_way(self, job_id: int) -> str | None:
        """The reservation a waiting job waits for: its own, not open yet, or one holding the nodes it
        could otherwise have; None if none does."""
        windows = self.topology.windows
        if job_id in self._members:
            name = self._members[job_id][1]
            return name if windows is None or windows.open_window(name, windows.now) is None else None
        job = self._waiting.get(job_id)
        if job is None or windows is None:
            return None
        every = (1 << self.topology.width) - 1
        closed = windows.closed_to(job, every)
        if not closed or self.topology.fits(every & ~self.topology.closed & ~closed, job):
            return None
        return next(window.name for window in windows.windows if window.columns & closed)

    def memory_room(self) -> Callable[[Job], bool]:
        """Whether a job's memory fits beside what the running jobs commit now, columns aside."""
        book = self._committed()
        every = (1 << self.topology.width) - 1
        return lambda job: self.topology.fits(book.usable(job, every), job)

    def _committed(self) -> MemoryBook:
        """The memory the running jobs commit now."""
        book = MemoryBook(self.topology)
        for running in self._running.values():
            book.commit(running.job, running.columns)
        return book

    def is_waiting(self, job_id: int) -> bool:
        return job_id in self._waiting or job_id in self._held or job_id in self._members

    def submit(self, job: Job, now: float, reservation: str | None = None) -> None:
        """``reservation``: the one it was submitted to, whose nodes and window alone it may have: the
        scheduler, not the policy, places it there (``_place_members``)."""
        if reservation is not None:
            self._members[job.job_id] = (job, reservation)
            return
        if not self.could_ever_fit(job):
            self._held[job.job_id] = job
            return
        self._waiting[job.job_id] = job
        self._policy.submit(job, now)

    def reorder(self, now: float) -> None:
        """The waiting jobs' priorities changed (policy/priority_order.py)."""
        self._policy.reorder(now)

    def finish(self, job_id: int, now: float) -> None:
        """A running job leaves: it ended, or its end was decided (its tasks may still be exiting)."""
        running = self._running.pop(job_id, None)
        if running is not None:
            self._policy.finish(running.job, now)

    def withdraw(self, job_id: int, now: float) -> None:
        """A waiting job leaves the queue (cancelled, or held back for good)."""
        if self._members.pop(job_id, None) is not None:
            return
        if self._held.pop(job_id, None) is None:
            waiting = self._waiting.pop(job_id, None)
            if waiting is not None:
                self._policy.withdraw(waiting, now)

    def is_held(self, job_id: int) -> bool:
        return job_id in self._held

    def rebuild(self, nodes: Mapping[str, NodeShape], now: float,
                adopt: Iterable[tuple[Job, list[Processor], float]] = (), closed: frozenset[str] = frozenset(),
                reservations: tuple[Reservation, ...] = ()) -> None:
        """The nodes up (name -> processors and memory, in the order the policy is to fill them: it takes
        the lowest free columns first), those of them ``closed`` to new jobs, or the ``reservations`` that
        hold some, changed: a new policy for them, with the jobs still running on them.

        ``adopt`` adds running jobs the policy never placed (their job, processors and start),
        as after a master restart, or a suspended job resumed.
        """
        names = list(nodes)
        columns = [Processor(name, index) for name in names for index in range(nodes[name].processors)]
        column = {processor: index for index, processor in enumerate(columns)}
        # row by row, so that the jobs of a row, whose columns are apart, form one again: adopted in the
        # order they started, a rebuild (which partitions of several tiers make at each preemption) could
        # scatter them over more rows than the MPL
        row_of = {job_id: index for index, row in enumerate(self.layout) for job_id in row}
        known = [(each.job, self._names(each.columns), each.started)
                 for each in sorted(self._running.values(), key=lambda each: row_of.get(each.job.job_id, 0))]
        running = {}
        for job, processors, started in [*known, *adopt]:
            if any(processor not in column for processor in processors):
                raise ValueError(f"job {job.job_id} runs on a processor that is not up: end it before the rebuild")
            running[job.job_id] = _Running(job, mask_of(column[processor] for processor in processors), started)
        waiting = sorted([*self._waiting.values(), *self._held.values()], key=lambda job: job.job_id)
        self.nodes, self.columns, self.closed, self.reservations = names, columns, closed, reservations
        self._column_of = column
        topology = Topology.of([nodes[name].processors for name in names], [nodes[name].memory for name in names])
        self.topology = dataclasses.replace(topology, closed=mask_of(column[processor] for processor in columns
                                                                      if processor.node in closed))
        if reservations:
            self.topology = dataclasses.replace(self.topology, windows=self._windows(reservations, column))
        memory = self.topology.node_memory or (0,) * len(names)
        self._shapes = {name: NodeShape(mask.bit_count(), bytes_) for name, mask, bytes_
                        in zip(names, self.topology.node_columns, memory, strict=True)}
        self._policy, self._running = self._build(), running
        self._waiting, self._held = {}, {}
        for each in running.values():
            self._policy.adopt(each.job, each.columns, each.started, now)
        for job in waiting:
            self.submit(job, now)
        self._read_layout()

    def _windows(self, reservations: tuple[Reservation, ...], column: dict[Processor, int]) -> Windows:
        """The reservations over these columns; a job holds its processors for its limit times the MPL under
        time sharing (a row's share of the time is at least one MPL-th)."""
        stretch = float(self.choice.mpl) if self.choice.time_shares else 1.0
        windows = tuple(Window(each.name, mask_of(index for processor, index in column.items()
                                                  if processor.node in each.nodes), each.start, each.end)
                        for each in reservations)
        return Windows(windows, stretch, self._grace_s)

    def schedule(self, now: float) -> Changes:
        windows = self.topology.windows
        if windows is not None:
            change = windows.next_change(self._decided_at)
            if change is not None and change <= now:  # a window opened or closed: every waiting job tried anew
                self.rebuild(self.node_shapes(), now, closed=self.closed, reservations=self.reservations)
                windows = self.topology.windows
                assert windows is not None
            windows.now = now
            self._place_members(windows, now)
        self._decided_at = now
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
        wake_at = decision.wake_at
        change = None if windows is None else windows.next_change(now)
        if change is not None:  # a window opens or closes: what may start changes
            wake_at = change if wake_at is None else min(wake_at, change)
        return Changes(starts, moves, wake_at, decision)

    def _place_members(self, windows: Windows, now: float) -> None:
        """The jobs of the reservations open now, in order, each on its window's columns where they are
        free in a row (or in a new one, below the MPL), adopted by the policy as running there: a
        reservation's nodes are its jobs' in its window, whatever the policy planned for the others."""
        if not self._members:
            return
        book = self._committed()
        plain = self.topology.without_windows()
        for job_id, (job, name) in list(self._members.items()):
            window = windows.open_window(name, now)
            if window is None:
                continue
            occupied = self._taken_by_row()
            if self.choice.time_shares:  # a row of its own, none taken, while the MPL allows one more
                occupied += [0] if len(occupied) < self.choice.mpl else []
            elif not occupied:
                occupied = [0]
            columns = next((chosen for taken in occupied
                            if (chosen := plain.choose(book.usable(job, window.columns & ~taken), job)) is not None),
                           None)
            if columns is None:
                continue
            del self._members[job_id]
            self._policy.adopt(job, columns, now, now)
            self._waiting[job_id] = job  # the layout's new job: a start (``schedule``)
            book.commit(job, columns)
            self._read_layout()

    def _taken_by_row(self) -> list[int]:
        """Per row of the layout, the columns its jobs hold (asked for every suspended gang at each preemption)."""
        if self._taken is None:
            self._taken = [functools.reduce(operator.or_, row.values(), 0) for row in self.layout]
        return self._taken

    def regroup(self, predictions: Mapping[int, float], now: float) -> Layout:
        """Slot homogeneity, where the policy has rows to regroup."""
        self._policy.homogenize(predictions, now)
        self._read_layout()
        return self.layout

    def set_migration_cost(self, seconds: float) -> None:
        self._policy.set_migration_cost(seconds)
        self.choice = dataclasses.replace(self.choice, migration_cost_s=seconds)

    def _build(self) -> LivePolicy:
        topology = self.topology
        return build_policy(self.choice, topology.width, self._longest_estimate, topology)

    def node_shapes(self) -> dict[str, NodeShape]:
        """The nodes up, as the last rebuild gave them (name -> processors and memory), in their order."""
        return dict(self._shapes)

    @property
    def rows(self) -> list[dict[Processor, int]]:
        """Per row, processor -> the job whose task runs there: a new list for each layout the policy makes
        (the master's columns compare it by identity), made when first asked for (the simulator never does)."""
        if self._rows is None:
            self._rows = [{processor: job_id for job_id, columns in row.items() for processor in self._names(columns)}
                          for row in self.layout]
        return self._rows

    def _read_layout(self) -> None:
        self.layout = self._policy.layout()
        self._rows = self._taken = None

    def _names(self, columns: int) -> list[Processor]:
        return [self.columns[column] for column in column_list(columns)]

