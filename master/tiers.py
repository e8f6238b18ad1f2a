"""Which nodes each partition's matrix sees, and preemption between partitions of different priority
tiers over the same nodes (docs/policies.md, "Preemption"), carried out for the master.

The rules are policy/tiers.py's, shared with the simulator: a gang on a node
where a higher tier runs gives way whole, as its partition's ``preempt_mode``
says: suspended (out of its matrix's rotation, so its nodes freeze it as any
descheduled gang; its memory kept; resumed, adopted back into its matrix,
once no higher-tier job runs on any of its nodes and the matrix has room for
it), requeued or cancelled; and
a matrix sees the nodes, memory and order ``seen_nodes`` gives. The matrices
settle highest tier first, each seeing what the ones above placed, until
nothing changes. Where no nodes are shared between tiers, a matrix sees its
partition's nodes up, and nothing here costs more than that.
"""

import logging

from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.matrices import Matrices, Matrix
from gangsched.master.nodes import NodeRegistry
from gangsched.master.placement import committed_memory, processors_of
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.policy.live_scheduler import NodeShape
from gangsched.policy.partitions import PreemptMode
from gangsched.policy.tiers import Gang, giving_way, on_nodes, seen_nodes
from gangsched.policy.windows import Reservation
from gangsched.protocol.records import JobState, Preemption

log = logging.getLogger("gangsched.master")

_ROUNDS = 8  # settle, preempt and resume this many times at most in one event: each round places more


class Tiers:
    def __init__(self, matrices: Matrices, table: JobTable, nodes: NodeRegistry, endings: Endings,
                 store: JobStore) -> None:
        self._matrices = matrices
        self._table = table
        self._nodes = nodes
        self._endings = endings
        self._store = store
        self.reservations: tuple[Reservation, ...] = ()  # on the monotonic clock (master/reservation_book.py)
        self.reshape()

    def book(self, reservations: tuple[Reservation, ...]) -> None:
        """The reservations as they are now, on the monotonic clock."""
        self.reservations = reservations

    def reshape(self) -> None:
        """The partitions changed (a reconfiguration): which share nodes between tiers, in which order."""
        matrices = list(self._matrices)
        self._by_tier = sorted(matrices, key=lambda matrix: -matrix.partition.priority_tier)
        self.shared = any(_overlap(first, second) for first in matrices for second in matrices
                          if first.partition.priority_tier != second.partition.priority_tier)

    def settle(self, now: Now) -> None:
        """After the events of one message or one tick: the matrices decide, highest tier first; where tiers
        share nodes, each sees what the ones above placed, and the gangs their jobs displace give way."""
        if not self.shared:
            self._matrices.settle(now)
            return
        up = self._nodes.up()
        for _ in range(_ROUNDS):
            for matrix in self._by_tier:
                self._matrices.settle_one(matrix, now)
                self._follow(up, [], now)
            if not any(matrix.queue.decide_again for matrix in self._matrices):
                return

    def follow_nodes(self, up: dict[str, NodeShape], adopted: list[Job], now: Now) -> None:
        """The nodes up changed, or restored jobs came back (``adopted``, all of whose nodes are up): each
        matrix that sees other nodes now is rebuilt over them."""
        self._follow(up, adopted, now)

    def _follow(self, up: dict[str, NodeShape], adopted: list[Job], now: Now) -> bool:
        """Preempt and resume as the jobs running now say; rebuild each matrix whose view changed. Whether
        anything changed."""
        placed = self._placed() if self.shared else {}
        resumed = self._give_way(list(placed.values()), now) if self.shared else []
        changed = bool(resumed)
        gangs = on_nodes([gang for gang, _ in placed.values()])
        table = self._table
        drained = self._nodes.closed()
        for matrix in self._matrices:
            holds = matrix.partition.holds
            mine = {name: shape for name, shape in up.items() if holds(name)}
            view = seen_nodes(matrix.partition.priority_tier, mine, gangs) if self.shared else mine
            closed = frozenset(name for name in view if name in drained)
            booked = tuple(each for each in self.reservations if any(holds(node) for node in each.nodes))
            # a gang restored suspended stays out of its matrix until it resumes
            back = [job for job in [*adopted, *resumed] if job.spec.partition == matrix.name and not job.suspended]
            matrix.rotation.shares_with_others({node for node, there in gangs.items()
                                                if any(placed[gang.job_id][1].spec.partition != matrix.name
                                                       and not gang.suspended for gang in there)})
            scheduler = matrix.queue.scheduler
            if list(view.items()) == list(scheduler.node_shapes().items()) and not back and closed == scheduler.closed \
                    and booked == scheduler.reservations:
                continue
            scheduler.rebuild(view, now.monotonic, [
                (table.policy_job(job, now), processors_of(job), now.monotonic_of(job.start_time or job.submit_time))
                for job in back], closed, booked)
            matrix.queue.event()
            changed = True
        return changed

    def _placed(self) -> dict[int, tuple[Gang, Job]]:
        """The jobs that hold their nodes, running (suspended or not) and not ending, as gangs."""
        found = {}
        for job in self._table.running():
            if job.ending is None:
                partition = self._matrices.of(job).partition
                found[job.job_id] = (Gang(job.job_id, partition.priority_tier, partition.preempt_mode, job.suspended,
                                          committed_memory([job]), len(job.node_names), job.suspended_by_admin), job)
        return found

    def _give_way(self, placed: list[tuple[Gang, Job]], now: Now) -> list[Job]:
        """Gangs on a node where a job of a higher tier runs give way; suspended gangs none of whose nodes
        has one any more are resumed (returned, for their matrix to adopt)."""
        decided = giving_way([gang for gang, _ in placed])
        jobs = {job.job_id: job for _, job in placed}
        for job_id, by in decided.preempted.items():
            self._preempt(jobs[job_id], by, now)
        # once its matrix has room for it: rather than a row past the MPL (it used the gang's processors)
        resumed = [jobs[job_id] for job_id in decided.resumed
                   if self._matrices.of(jobs[job_id]).queue.scheduler.has_room(processors_of(jobs[job_id]))]
        for job in resumed:
            self._resume(job, now)
        return resumed

    def _preempt(self, job: Job, by: int, now: Now) -> None:
        matrix = self._matrices.of(job)
        mode = matrix.partition.preempt_mode
        log.info("job %d is preempted by job %d of a higher tier: %s", job.job_id, by, mode)
        if mode is PreemptMode.SUSPEND:
            self.suspend(job, Preemption(by_job=by, start=now.wall), now)
            return
        # requeued or cancelled (off never comes here: a higher tier does not see its nodes)
        reason = f"Preempted by job {by}"
        self._endings.decide_end(job, JobState.PENDING if mode is PreemptMode.REQUEUE else JobState.CANCELLED,
                                 reason, now)

    def suspend(self, job: Job, record: Preemption, now: Now) -> None:
        """A running gang leaves its matrix, its tasks frozen where they are as any descheduled gang's, its
        memory kept; ``record`` says by what."""
        job.suspended_by(record)
        self._matrices.of(job).queue.left_the_policy(job, now)
        self._save(job)

    def _resume(self, job: Job, now: Now) -> None:
        log.info("job %d resumes: no job of a higher tier runs on its nodes", job.job_id)
        self.end_suspension(job, now)

    def end_suspension(self, job: Job, now: Now) -> None:
        """A suspended job's record closed: the caller puts it back into its matrix (or requeues it)."""
        job.resumed(now.wall)
        self._save(job)

    def _save(self, job: Job) -> None:
        """A preemption's record goes with the loop's commit; one the store cannot take is written again
        with the job's next write (its state in memory is what the nodes are told)."""
        try:
            self._store.save(job)
        except StoreWriteError as error:
            log.error("the job store cannot write job %d's preemption (%s)", job.job_id, error)


def _overlap(first: Matrix, second: Matrix) -> bool:
    mine, theirs = first.partition.nodes, second.partition.nodes
    return mine is None or theirs is None or bool(mine & theirs)
