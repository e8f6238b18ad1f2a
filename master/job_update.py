"""A job's request changed after its submission (docs/operations.md, "Jobs"): Slurm's ``scontrol update
jobid=... TimeLimit=... Name=... Dependency=... Partition=... Priority=...``, as ``gang update``.

A pending job may change any of them: it leaves its partition's queue and is
queued again with its new request, in its turn (its submission time); a new
partition is chosen and checked as at submission. A running job may change
only its name and its time limit (the limit's clock, ``ran_s``, goes on). Its
owner may lower its time limit, only root raise it or set its priority.
"""

import dataclasses
import logging

from pydantic import ValidationError

from gangsched.master.client_requests import ClientRequests
from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.pending import Queues
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.protocol.admin_messages import JobUpdate, JobUpdated
from gangsched.protocol.dependency_text import NONE, dependency_text
from gangsched.protocol.durations import format_duration
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import ErrorReply
from gangsched.protocol.records import JobSpec, JobState

log = logging.getLogger("gangsched.master")

_RUNNING_MAY_CHANGE = {"name", "estimate_s"}
# what gang update names each change, as Slurm's scontrol, and the spec's fields it sets
_LABELS = (("TimeLimit", ("estimate_s",)), ("Name", ("name",)), ("Dependency", tuple(NONE)),
           ("Partition", ("partition",)), ("Priority", ("priority",)))


class JobUpdates:
    def __init__(self, table: JobTable, queues: Queues, endings: Endings,
                 client_requests: ClientRequests, store: JobStore) -> None:
        self._table = table
        self._queues = queues
        self._endings = endings
        self._client_requests = client_requests
        self._store = store

    def update(self, message: JobUpdate, now: Now) -> JobUpdated | ErrorReply:
        job = self._table.get(message.job_id)
        if job is None:
            return ErrorReply.nothing_changed(ErrorCode.UNKNOWN_JOB, f"no pending or running job {message.job_id}: "
                                              "an ended job does not change")
        user, changes = message.user, message.changes()
        if user not in ("root", job.spec.user):
            return ErrorReply.nothing_changed(ErrorCode.PERMISSION_DENIED,
                                              f"job is {job.spec.user}'s: only they and root may update it")
        refusal = _refusal(job.spec, job.state, user, changes)
        if job.ending is not None or job.job_id in self._table.unadopted:
            refusal = refusal or f"job {job.job_id} is ending or waits for its nodes: try again in a moment"
        if refusal is not None:
            code = ErrorCode.PERMISSION_DENIED if "only" in refusal else ErrorCode.INVALID_SPEC
            return ErrorReply.nothing_changed(code, refusal)
        try:  # the whole request as it would be, checked as a submission is (a copy would check nothing)
            spec = JobSpec.model_validate({**job.spec.model_dump(), **changes})
        except ValidationError as error:
            problem = error.errors()[0]
            where = ".".join(str(part) for part in problem["loc"]) or "the job"
            return ErrorReply.nothing_changed(ErrorCode.INVALID_SPEC, f"{where}: {problem['msg']}")
        if job.state is JobState.PENDING and ({"partition", "estimate_s"} & changes.keys()):
            chosen = self._client_requests.partition_for(spec, now)
            if isinstance(chosen, ErrorReply):
                return ErrorReply.nothing_changed(chosen.code, chosen.reason)
            spec = chosen[1]
        elif "after_ok" in changes:  # a new dependency is all of its fields
            dependency = self._client_requests.dependency_refusal(spec)
            if dependency is not None:
                return ErrorReply.nothing_changed(dependency.code, dependency.reason)
        before = job.spec
        try:
            self._store.save(_with_spec(job, spec))
        except StoreWriteError as error:
            return ErrorReply.nothing_changed(ErrorCode.INTERNAL, f"the job store cannot write ({error})")
        if job.state is JobState.PENDING:
            self._queues.of(job).withdraw(job, now)
            job.respecified(spec)
            self._endings.enqueue(job, now)
        else:
            job.respecified(spec)
        words = [f"{label} {_shown(label, before)} -> {_shown(label, spec)}" for label, keys in _LABELS
                 if changes.keys() & set(keys)]
        log.info("job %d updated by %s: %s", job.job_id, user, "; ".join(words))
        return JobUpdated(job=job.info(), changes=words)


def _refusal(spec: JobSpec, state: JobState, user: str, changes: dict[str, object]) -> str | None:
    if not changes:
        return "nothing to update: give KEY=VALUE (TimeLimit, Name, Dependency, Partition, Priority)"
    if "priority" in changes and user != "root":
        return "only root sets a job's priority"
    limit = changes.get("estimate_s")
    if isinstance(limit, float) and spec.estimate_s is not None and limit > spec.estimate_s and user != "root":
        return f"only root raises a time limit ({format_duration(spec.estimate_s)} to {format_duration(limit)})"
    if state is JobState.RUNNING and changes.keys() - _RUNNING_MAY_CHANGE:
        unchangeable = ", ".join(sorted(changes.keys() - _RUNNING_MAY_CHANGE))
        return f"the job is running: only its name and time limit change, not {unchangeable}"
    return None


def _with_spec(job: Job, spec: JobSpec) -> Job:
    """The job as it is written with its new request, before the master's memory follows."""
    return dataclasses.replace(job, spec=spec)


def _shown(label: str, spec: JobSpec) -> str:
    """A setting of ``spec`` as Slurm's scontrol spells it."""
    match label:
        case "TimeLimit":
            return format_duration(spec.estimate_s)
        case "Dependency":
            return dependency_text(spec.model_dump(include=set(NONE))) or "none"
        case "Name":
            return spec.name
        case "Partition":
            return spec.partition or "-"
    return f"{spec.priority:g}"
