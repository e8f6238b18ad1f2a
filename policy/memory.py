"""Memory as a resource that time sharing never overcommits (docs/policies.md, "Memory").

Under gang scheduling every job in a node's rows stays resident while it is
stopped, so a job commits its memory on each node it is placed on, in every
row at once: a node's memory must hold all of its rows' jobs together. A copy
of FillMatrix is the same processes on the same columns, so it commits
nothing more; a job that migrates moves its commitment with it.

A request is Slurm's: ``--mem`` per node the job touches, or
``--mem-per-cpu`` per task (``per_node`` and ``per_task``, in bytes). A
machine whose topology declares no memory counts none.
"""

from dataclasses import dataclass, field
from typing import NamedTuple, Protocol

from gangsched.policy.columns import column_list, lowest_columns
from gangsched.policy.topology import Shaped, Topology


class MemoryRequest(NamedTuple):
    """What a job needs on each node it runs on: ``per_node`` bytes plus ``per_task`` bytes for each of its tasks there.

    A tuple: a queue's requests are looked up in dictionaries at every event, and a tuple hashes in C.
    """

    per_node: int = 0
    per_task: int = 0

    def __bool__(self) -> bool:
        return bool(self.per_node or self.per_task)

    def on_node(self, tasks: int) -> int:
        return self.per_node + self.per_task * tasks if tasks else 0

    def tasks_within(self, room: int, most: int) -> int:
        """How many of ``most`` tasks a node with ``room`` bytes uncommitted holds (0: none)."""
        if room < self.on_node(1):
            return 0
        if not self.per_task:
            return most
        return min(most, (room - self.per_node) // self.per_task)


NO_MEMORY = MemoryRequest()


class NeedsMemory(Shaped, Protocol):
    job_id: int
    memory: MemoryRequest


@dataclass
class Limit:
    """The columns a job's memory allows it, whatever else holds them: ``mask``, less the
    columns beyond ``caps`` tasks on the nodes named there."""

    mask: int
    caps: dict[int, int]  # a node's columns -> the most tasks it holds, where fewer than it has processors

    def apply(self, free: int) -> int:
        allowed = free & self.mask
        for columns, most in self.caps.items():
            here = allowed & columns
            if here.bit_count() > most:
                allowed = allowed & ~here | lowest_columns(here, most)
        return allowed


@dataclass
class _Kept:
    """A request's limit as of a point in the book's log of changed nodes."""

    limit: Limit
    seen: int
    answer: Limit | None  # the limit, or None where it allows every column


_KEPT_REQUESTS = 64  # distinct requests whose limits are kept up to date; a trace may have thousands


@dataclass
class MemoryBook:
    """What the placed jobs commit on each node, against what each node has.

    A queue holds many jobs of the same few requests, and one event changes a
    few nodes: each request's limit is kept, and brought up to date from a log
    of the nodes changed since, so a big machine is not walked node by node at
    each placement.
    """

    topology: Topology
    committed: list[int] = field(init=False)
    by_job: dict[int, dict[int, int]] = field(default_factory=dict)  # job -> node index -> bytes
    _node_of_column: list[int] = field(init=False)
    _full: int = field(init=False)
    _columns: tuple[int, ...] = field(init=False)
    _widths: list[int] = field(init=False)
    _capacity: tuple[int, ...] = field(init=False)
    _kept: dict[MemoryRequest, _Kept] = field(default_factory=dict, init=False)
    _changed: list[int] = field(default_factory=list, init=False)  # nodes, in the order their commitment changed
    version: int = field(
        default=0, init=False
    )  # counts the changes: what was worked out from the book holds until it moves

    def __post_init__(self) -> None:
        self.committed = [0] * len(self.topology.node_columns)
        self._node_of_column = [node for node, mask in enumerate(self.topology.node_columns)
                                for _ in range(mask.bit_count())]
        self._full = (1 << self.topology.width) - 1
        self._columns = self.topology.node_columns
        self._widths = [columns.bit_count() for columns in self._columns]
        self._capacity = self.topology.node_memory or ()

    @property
    def counted(self) -> bool:
        return self.topology.node_memory is not None

    def copy(self) -> "MemoryBook":
        twin = object.__new__(MemoryBook)  # not through __post_init__: backfilling copies a book per plan
        twin.__dict__.update(self.__dict__)
        twin.committed = list(self.committed)
        twin.by_job = dict(self.by_job)  # a commitment is replaced, never changed in place
        twin._kept, twin._changed = {}, []
        return twin

    def restore(self, other: "MemoryBook") -> None:
        self.committed, self.by_job = other.committed, other.by_job
        self.version += 1
        self._kept.clear()
        self._changed.clear()

    def limit(self, job: NeedsMemory, moving: bool = False) -> Limit | None:
        """Where ``job``'s memory fits beside everything committed (without its own commitment if
        ``moving``); None: anywhere. A limit is good until the next commitment changes."""
        request = job.memory
        if not (request.per_node or request.per_task) or self.topology.node_memory is None:
            return None
        kept = self._kept.get(request)  # a queue holds many jobs of the same request
        if kept is None or kept.seen != len(self._changed):
            kept = self._bring_up_to_date(request, kept)
        if not moving:
            return kept.answer
        # the request's limit, with the job's own commitment as room on its nodes
        limit = Limit(kept.limit.mask, dict(kept.limit.caps))
        for node, amount in self.by_job.get(job.job_id, {}).items():
            self._update(limit, request, node, amount)
        return self._answer(limit)

    def _answer(self, limit: Limit) -> Limit | None:
        return None if limit.mask == self._full and not limit.caps else limit

    def _bring_up_to_date(self, request: MemoryRequest, kept: _Kept | None) -> _Kept:
        if len(self._changed) > 4 * len(self.committed):  # a long log: start afresh
            self._kept.clear()
            self._changed.clear()
            kept = None
        if kept is None:
            if len(self._kept) >= _KEPT_REQUESTS:
                self._kept.clear()
            limit = self._limit(request)
            kept = self._kept[request] = _Kept(limit, len(self._changed), self._answer(limit))
            return kept
        for node in set(self._changed[kept.seen:]):
            self._update(kept.limit, request, node)
        kept.seen, kept.answer = len(self._changed), self._answer(kept.limit)
        return kept

    def _limit(self, request: MemoryRequest) -> Limit:
        limit = Limit(0, {})
        for node in range(len(self.committed)):
            self._update(limit, request, node)
        return limit

    def _update(self, limit: Limit, request: MemoryRequest, node: int, own: int = 0) -> None:
        # MemoryRequest.tasks_within, unrolled: it runs for every changed node of every kept request
        columns, width = self._columns[node], self._widths[node]
        room = self._capacity[node] - self.committed[node] + own
        per_node, per_task = request
        if room < per_node + per_task:
            limit.mask &= ~columns
            limit.caps.pop(columns, None)
            return
        limit.mask |= columns
        tasks = width if not per_task or width == 1 else min(width, (room - per_node) // per_task)
        if tasks < width:
            limit.caps[columns] = tasks
        else:
            limit.caps.pop(columns, None)

    def usable(self, job: NeedsMemory, free: int, moving: bool = False) -> int:
        limit = self.limit(job, moving)
        return free if limit is None else limit.apply(free)

    def commit(self, job: NeedsMemory, columns: int) -> None:
        if not job.memory or not self.counted:
            return
        nodes: dict[int, int] = {}
        for column in column_list(columns):
            node = self._node_of_column[column]
            nodes[node] = nodes.get(node, 0) + 1
        commitment = {node: job.memory.on_node(tasks) for node, tasks in nodes.items()}
        for node, amount in commitment.items():
            self.committed[node] += amount
        self.by_job[job.job_id] = commitment
        self._changed.extend(commitment)
        self.version += 1

    def release(self, job_id: int) -> None:
        commitment = self.by_job.pop(job_id, None)
        if commitment is None:
            return
        for node, amount in commitment.items():
            self.committed[node] -= amount
        self._changed.extend(commitment)
        self.version += 1

    def move(self, job: NeedsMemory, columns: int) -> None:
        self.release(job.job_id)
        self.commit(job, columns)

    def fits_moves(self, moves: list[tuple[NeedsMemory, int]]) -> bool:
        """Whether these jobs may all take these new columns at once (their old commitments released)."""
        if not self.counted or not any(job.memory for job, _ in moves):
            return True
        trial = self.copy()
        for job, _ in moves:
            trial.release(job.job_id)
        for job, columns in moves:
            trial.commit(job, columns)
        return trial.within()

    def within(self) -> bool:
        capacity = self.topology.node_memory
        return capacity is None or all(used <= total for used, total in zip(self.committed, capacity, strict=True))

    def first_room(self, job: NeedsMemory, ends: list[tuple[float, int]], now: float) -> float:
        """The earliest of ``now`` and the running jobs' estimated ``ends`` (end, job id) after which
        ``job``'s memory fits the machine, columns aside: where backfilling may plan its start."""
        topology, full = self.topology, self._full
        if topology.fits(self.usable(job, full), job):
            return now
        trial = self.copy()
        for end, job_id in sorted(ends):
            trial.release(job_id)
            if topology.fits(trial.usable(job, full), job):
                return max(end, now)
        return now  # it never fits, even alone: refused before it reaches a policy

