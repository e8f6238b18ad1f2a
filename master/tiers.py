"""Which nodes each partition's matrix sees, and preemption between partitions of different priority
tiers over the same nodes (docs/policies.md, "Preemption").

A node runs the jobs of one tier at a time: the highest whose jobs run on it.
A lower tier's matrix does not see a node where a job of a higher tier runs,
and the lower-tier gangs with a task there give way whole, as their
partition's ``preempt_mode`` says: suspended (out of their matrix's rotation,
so their nodes freeze them as any descheduled gang; their memory kept;
resumed, adopted back into their matrix, once no higher-tier job runs on any
of their nodes), requeued or cancelled. A higher tier's matrix sees the nodes
of lower tiers as free, but for those where a gang that may not be preempted
(``off``) runs, with the memory the suspended gangs keep there taken off, and
in the order ``preemption_order`` gives: its policy fills the lowest free
columns first, so a job preempts only where its own matrix has no room, and
then the fewest and smallest gangs. The matrices settle highest tier first,
each seeing what the ones above placed, until nothing changes. Where no nodes
are shared between tiers, a matrix sees its partition's nodes up, and nothing
here costs more than that.
"""

import logging

from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.matrices import Matrices, Matrix
from gangsched.master.nodes import NodeRegistry
from gangsched.master.placement import committed_memory, processors_of
from gangsched.master.scheduling import NodeShape
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.policy.partitions import PreemptMode, preemption_order
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
        self.reshape()

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
        resumed = self._give_way(placed, now) if self.shared else []
        changed = bool(resumed)
        table = self._table
        for matrix in self._matrices:
            view = self._view(matrix, up, placed)
            # a gang restored suspended stays out of its matrix until it resumes
            back = [job for job in [*adopted, *resumed] if job.spec.partition == matrix.name and not job.suspended]
            matrix.rotation.foreign = self._foreign(matrix, placed)
            scheduler = matrix.queue.scheduler
            if list(view.items()) == list(scheduler.node_shapes().items()) and not back:
                continue
            scheduler.rebuild(view, now.monotonic, [
                (table.policy_job(job, now), processors_of(job), now.monotonic_of(job.start_time or job.submit_time))
                for job in back])
            matrix.queue.event()
            changed = True
        return changed

    def _placed(self) -> dict[str, list[Job]]:
        """Per node, the jobs with a task there that hold it: running (suspended or not), not ending."""
        found: dict[str, list[Job]] = {}
        for job in self._table.running():
            if job.ending is None:
                for node in dict.fromkeys(job.node_names):
                    found.setdefault(node, []).append(job)
        return found

    def _foreign(self, matrix: Matrix, placed: dict[str, list[Job]]) -> set[str]:
        """The nodes where gangs of other tiers run now: a job of ``matrix`` placed there starts with the
        switch that stops them, not at once."""
        name = matrix.name
        return {node for node, jobs in placed.items()
                if any(job.spec.partition != name and not job.suspended for job in jobs)}

    def _tier(self, job: Job) -> int:
        return self._matrices.of(job).partition.priority_tier

    def _give_way(self, placed: dict[str, list[Job]], now: Now) -> list[Job]:
        """Gangs on a node where a job of a higher tier runs give way; suspended gangs none of whose nodes
        has one any more are resumed (returned, for their matrix to adopt)."""
        top: dict[str, tuple[int, int]] = {}  # node -> the highest tier running there, and its lowest job id
        for node, jobs in placed.items():
            for job in jobs:
                if not job.suspended:
                    top[node] = max(top.get(node, (-1, 0)), (self._tier(job), -job.job_id))
        resumed = []
        for job in self._table.running():
            if job.ending is not None:
                continue
            tier = self._tier(job)
            above = [top[node] for node in set(job.node_names) if node in top and top[node][0] > tier]
            if above and not job.suspended:
                self._preempt(job, -max(above)[1], now)
            elif not above and job.suspended:
                self._resume(job, now)
                resumed.append(job)
        return resumed

    def _preempt(self, job: Job, by: int, now: Now) -> None:
        matrix = self._matrices.of(job)
        mode = matrix.partition.preempt_mode
        log.info("job %d is preempted by job %d of a higher tier: %s", job.job_id, by, mode)
        if mode is PreemptMode.SUSPEND:
            job.preemptions = [*job.preemptions, Preemption(by_job=by, start=now.wall)]
            matrix.queue.left_the_policy(job, now)
            self._save(job)
            return
        # requeued or cancelled (off never comes here: a higher tier does not see its nodes)
        reason = f"Preempted by job {by}"
        self._endings.decide_end(job, JobState.PENDING if mode is PreemptMode.REQUEUE else JobState.CANCELLED,
                                 reason, now)

    def _resume(self, job: Job, now: Now) -> None:
        last = job.preemptions[-1]
        job.preemptions = [*job.preemptions[:-1], last.model_copy(update={"end": now.wall})]
        log.info("job %d resumes: no job of a higher tier runs on its nodes", job.job_id)
        self._save(job)

    def _save(self, job: Job) -> None:
        """A preemption's record goes with the loop's commit; one the store cannot take is written again
        with the job's next write (its state in memory is what the nodes are told)."""
        try:
            self._store.save(job)
        except StoreWriteError as error:
            log.error("the job store cannot write job %d's preemption (%s)", job.job_id, error)

    def _view(self, matrix: Matrix, up: dict[str, NodeShape], placed: dict[str, list[Job]]) -> dict[str, NodeShape]:
        """The nodes ``matrix`` sees, with the memory its jobs may commit there, in the order its policy
        is to fill them."""
        holds = matrix.partition.holds
        mine = {name: shape for name, shape in up.items() if holds(name)}
        if not self.shared:
            return mine
        tier = matrix.partition.priority_tier
        lower_gangs: dict[str, list[int]] = {}
        view: dict[str, NodeShape] = {}
        for name, shape in mine.items():
            jobs = placed.get(name, [])
            if any(self._tier(job) > tier and not job.suspended for job in jobs):
                continue  # a higher tier runs here
            lower = [job for job in jobs if self._tier(job) < tier]
            if any(self._matrices.of(job).partition.preempt_mode is PreemptMode.OFF and not job.suspended
                   for job in lower):
                continue  # a gang that may not be preempted runs here
            kept = committed_memory([job for job in lower
                                     if self._matrices.of(job).partition.preempt_mode is PreemptMode.SUSPEND])
            view[name] = NodeShape(shape.processors, max(0, shape.memory - kept.get(name, 0)))
            lower_gangs[name] = [len(job.node_names) for job in lower if not job.suspended]
        return {name: view[name] for name in preemption_order(lower_gangs)}


def _overlap(first: Matrix, second: Matrix) -> bool:
    mine, theirs = first.partition.nodes, second.partition.nodes
    return mine is None or theirs is None or bool(mine & theirs)
