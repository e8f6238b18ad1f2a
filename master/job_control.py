"""Holding, releasing, suspending, resuming and requeueing jobs (docs/operations.md, "Jobs"): Slurm's
``scontrol hold|release|suspend|resume|requeue``.

A held job is pending and out of its partition's queue (master/pending.py)
until released; its owner's hold (JobHeldUser) is released by the owner or
root, root's (JobHeldAdmin) by root only. An administrator's suspension is
a preemption with no job behind it (master/tiers.py): the gang leaves its
matrix's rotation, its tasks are frozen where they are with their memory
kept and its time limit stops, until root resumes it, when it is adopted
back into a row of its matrix where its processors are (even past the MPL,
as a job adopted after a restart is). A requeued job's tasks are killed and
it waits again, as after a lost node with ``--requeue``; its output is
appended to. A command names jobs: it acts on all of them, or, if any may
not be acted on, on none.
"""

import dataclasses
import logging

from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.nodes import NodeRegistry
from gangsched.master.pending import Queues
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.master.tiers import Tiers
from gangsched.master.waiting import Wait, WaitKind
from gangsched.protocol.admin_messages import JobAction, JobControl, JobsControlled
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import ErrorReply
from gangsched.protocol.records import Hold, JobState, Preemption

log = logging.getLogger("gangsched.master")

_ROOT_ONLY = (JobAction.SUSPEND, JobAction.RESUME)


class JobControls:
    def __init__(self, nodes: NodeRegistry, table: JobTable, queues: Queues, endings: Endings, tiers: Tiers,
                 store: JobStore) -> None:
        self._nodes = nodes
        self._table = table
        self._queues = queues
        self._endings = endings
        self._tiers = tiers
        self._store = store

    def act(self, message: JobControl, now: Now) -> JobsControlled | ErrorReply:
        user, action = message.user, message.action
        if action in _ROOT_ONLY and user != "root":
            return ErrorReply.nothing_changed(ErrorCode.PERMISSION_DENIED, f"only root may {action} jobs, not {user}")
        jobs = []
        for job_id in message.job_ids:
            job = self._table.get(job_id)
            if job is None:
                return ErrorReply.nothing_changed(ErrorCode.UNKNOWN_JOB, f"no pending or running job {job_id}")
            if user not in ("root", job.spec.user):
                return ErrorReply.nothing_changed(ErrorCode.PERMISSION_DENIED, f"job {job_id} is {job.spec.user}'s: "
                                                  f"only they and root may {action} it")
            refusal = _refusal(job, user, action, job_id in self._table.unadopted)
            if refusal is not None:
                return ErrorReply.nothing_changed(ErrorCode.INVALID_SPEC, f"job {job_id} {refusal}")
            jobs.append(job)
        if action in (JobAction.HOLD, JobAction.RELEASE):  # written whole before anything changes
            hold = None if action is JobAction.RELEASE else Hold.ADMIN if user == "root" else Hold.USER
            try:
                self._store.save(*[_with_hold(job, hold) for job in jobs])
            except StoreWriteError as error:
                return ErrorReply.nothing_changed(ErrorCode.INTERNAL, f"the job store cannot write ({error})")
        for job in jobs:
            self._apply(job, user, action, now)
        log.info("jobs %s: %s by %s", ",".join(str(job.job_id) for job in jobs), action, user)
        return JobsControlled(action=action, jobs=[job.info() for job in jobs])

    def _apply(self, job: Job, user: str, action: JobAction, now: Now) -> None:
        queue = self._queues.of(job)
        match action:
            case JobAction.HOLD:
                queue.withdraw(job, now)
                job.held(by_root=user == "root")
                for released in queue.left(job):  # the throttle of its array lets the next one in
                    self._endings.enqueue(released, now)
                self._endings.enqueue(job, now)  # held there, with its reason
            case JobAction.RELEASE:
                job.released()
                self._endings.enqueue(job, now)
            case JobAction.SUSPEND:
                self._tiers.suspend(job, Preemption(by_user=user, start=now.wall), now)
            case JobAction.RESUME:
                self._tiers.end_suspension(job, now)
                self._tiers.follow_nodes(self._nodes.up(), [job], now)
            case JobAction.REQUEUE:
                if job.suspended:
                    self._tiers.end_suspension(job, now)
                self._endings.decide_end(job, JobState.PENDING, f"requeued by {user}", now)


def _refusal(job: Job, user: str, action: JobAction, unadopted: bool) -> str | None:
    """Why ``user`` may not act on ``job``, if so; ``unadopted``: restored running, its nodes not all back."""
    if job.ending is not None or (job.wait is not None and job.wait.kind is WaitKind.START_POSTPONED):
        return "is ending" if job.ending is not None else "is starting: try again in a moment"
    if unadopted:
        return "waits for its nodes to come back after a master restart: try again in a moment"
    running = job.state is JobState.RUNNING
    match action:
        case JobAction.HOLD:
            if running:
                return "is running: only a pending job is held (gang admin suspend stops a running one)"
            if job.hold is Hold.ADMIN or (job.hold is Hold.USER and user != "root"):
                return "is held already"
        case JobAction.RELEASE:
            if job.hold is None:
                return "is not held"
            if job.hold is Hold.ADMIN and user != "root":
                return "is held by root: only root releases it"
        case JobAction.SUSPEND:
            if not running or job.suspended:
                return "is not running" if not running else "is suspended already"
            if job.migration is not None:
                return "is migrating: suspend it once it runs on its new nodes"
        case JobAction.RESUME:
            if not job.suspended_by_admin:
                return "was not suspended by an administrator" if job.suspended else "is not suspended"
        case JobAction.REQUEUE:
            if not running:
                return "is not running: only a running job is requeued"
    return None


def _with_hold(job: Job, hold: Hold | None) -> Job:
    """The job as it is written with its new hold (its reason too), before the master's memory follows."""
    held = None if hold is None else Wait(WaitKind.HELD_USER if hold is Hold.USER else WaitKind.HELD_ADMIN)
    return dataclasses.replace(job, hold=hold, wait=held)
