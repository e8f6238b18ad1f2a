"""The tasks the master expects on a node against those its daemon says it runs (its hello), the jobs
restored running by a master that restarted, adopted once their nodes are back, and the tasks lost with a
node: which vanished, which are orphans to kill, which launches are still on their way."""

import logging
from collections import deque

from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_steps import TaskId
from gangsched.master.job_table import JobTable
from gangsched.master.matrices import Matrices
from gangsched.master.nodes import NodeRegistry
from gangsched.master.starting import Starts
from gangsched.master.tiers import Tiers
from gangsched.protocol.messages import KillTask, Message, NodeHello
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class TaskReconciliation:
    def __init__(self, nodes: NodeRegistry, table: JobTable, matrices: Matrices, tiers: Tiers, starts: Starts,
                 endings: Endings, outbox: deque[tuple[str, Message]]) -> None:
        self._nodes = nodes
        self._table = table
        self._matrices = matrices
        self._tiers = tiers
        self._starts = starts
        self._endings = endings
        self._outbox = outbox
        # restored jobs: the tasks (step, rank) their daemons, back, had no trace of
        self._unseen: dict[int, set[TaskId]] = {}

    def follow_nodes(self, now: Now) -> None:
        """Rebuild the policy of each partition whose nodes up changed; adopt restored jobs whose nodes are
        all back."""
        up = self._nodes.up()
        adopted = [job for job in self._table.adopt(set(up)) if self._launched(job, now)]
        self._tiers.follow_nodes(up, adopted, now)

    def reconcile(self, hello: NodeHello, now: Now) -> None:
        reported = {(task.job_id, task.step, task.rank) for task in hello.tasks}
        expected = {
            (job.job_id, step, rank)
            for job in self._table.jobs.values()
            for step, rank in job.live_on(hello.node)
        }
        for job_id, step, rank in sorted(reported - expected):
            log.warning("node %s runs job %d step %d rank %d that is not the master's: killing it",
                        hello.node, job_id, step, rank)
            self._outbox.append((hello.node, KillTask(job_id=job_id, step=step, reason="orphaned task")))
        for job_id, step, rank in reported:
            self._starts.arrived(job_id, step, rank)
        for job_id, step, rank in sorted(expected - reported):
            in_flight = self._starts.in_flight(job_id, step, rank, hello.incarnation)
            if in_flight is not None:
                # the same daemon: the launch is on its way, or this hello left before it came;
                # sent again, it starts the task or is ignored as one that runs
                self._outbox.append((hello.node, in_flight))
                continue
            job = self._table.jobs[job_id]
            if job_id in self._table.unadopted and job.launched_to.get(hello.node) == hello.incarnation:
                self._unseen.setdefault(job_id, set()).add((step, rank))  # decided once all its nodes are back
                continue
            reason = f"rank {rank}" + (f" of step {step}" if step else "") + f" vanished from node {hello.node}"
            self._endings.ranks_gone(job, step, {rank}, (_lost_state(job), reason), now)

    def _launched(self, job: Job, now: Now) -> bool:
        """A job restored running whose nodes are all back: whether its launch reached them.

        A daemon of the incarnation the job was sent to keeps each task, and each exit until the master
        acknowledges it, which it does only once the job's end is committed (group commit). So where no
        rank of the job left a trace on such daemons, the master died before its launch arrived: the job
        goes back to the queue, its start undone. Where only some left none, those are lost."""
        unseen = self._unseen.pop(job.job_id, set())
        if unseen and unseen == job.live_tasks():
            reason = "its launch was lost when the master restarted"
            log.warning("job %d: %s: queued again", job.job_id, reason)
            self._endings.tasks_gone(job, unseen, (JobState.PENDING, reason), now)
            return False
        if unseen:
            vanished = ", ".join(f"{step}.{rank}" if step else str(rank) for step, rank in sorted(unseen))
            self._endings.tasks_gone(job, unseen, (_lost_state(job), f"ranks {vanished} vanished from their "
                                                   "nodes while the master restarted"), now)
        return job.job_id in self._table.jobs and job.ending is None

    def end_jobs_on(self, name: str, reason: str, now: Now) -> list[Job]:
        """The jobs with a task on node ``name`` (or moving there) lose those tasks, and end or are requeued."""
        ended = []
        for job in list(self._table.jobs.values()):
            tasks = job.live_on(name)
            if tasks or name in self._matrices.of(job).queue.scheduler.nodes_of(job.job_id):  # on it, or moving there
                tasks |= self._unseen.pop(job.job_id, set())  # restored: those found on nodes back are gone too
                self._endings.tasks_gone(job, tasks, (_lost_state(job), reason), now)
                ended.append(job)
        return ended


def _lost_state(job: Job) -> JobState:
    return JobState.PENDING if job.spec.requeue else JobState.NODE_FAIL
