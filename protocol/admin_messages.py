"""The messages of day-to-day operation (docs/operations.md): an administrator drains, resumes or
takes down nodes; a user or an administrator holds, releases, suspends, resumes, requeues or updates
jobs; root sets users' limits; the record of every such command. Each is answered by its reply
model or ``ErrorReply``; every request here, done or refused, is recorded by the master
(``AdminLogQuery`` reads the record).
"""

from enum import StrEnum
from typing import Literal

from pydantic import Field, field_validator

from gangsched.protocol.records import JobInfo, UserLimits, WireModel

_REASON_CHARACTERS = 200
_JOBS_PER_ACTION = 1000


class Tokened(WireModel):
    """A command with the client's name for it (``token``): sent again (a retry after a lost reply), it is
    answered as the first was, not carried out or recorded twice."""

    token: str | None = Field(None, min_length=1, max_length=64)


class NodeAction(StrEnum):
    """Slurm's ``scontrol update nodename=... state=drain|resume|down``."""

    DRAIN = "drain"  # no new job; those there run to their end
    RESUME = "resume"  # back in service
    DOWN = "down"  # out of service now: its jobs end (NODE_FAIL) or are requeued, as on a lost node


class NodeUpdate(Tokened):
    """Root changes the state of the nodes of a hostlist (``gang admin node``)."""

    type: Literal["node_update"] = "node_update"
    admin: str
    nodes: str = Field(min_length=1, max_length=4096)  # Slurm's hostlist: node[01-64],big1
    action: NodeAction
    reason: str | None = Field(None, min_length=1, max_length=_REASON_CHARACTERS)


class NodesUpdated(WireModel):
    type: Literal["nodes_updated"] = "nodes_updated"
    nodes: list[str]
    action: NodeAction


class JobAction(StrEnum):
    HOLD = "hold"  # a pending job stays out of its queue (Slurm's scontrol hold)
    RELEASE = "release"  # ... and goes back to it
    SUSPEND = "suspend"  # a running gang is frozen whole, out of its matrix's rotation, its memory kept (root)
    RESUME = "resume"  # ... and goes back into a row of its matrix (root)
    REQUEUE = "requeue"  # a running job is killed and queued again, its output appended to


class JobControl(Tokened):
    """``user`` acts on jobs (``gang hold``, ``gang release``, ``gang requeue``, ``gang admin suspend``,
    ``gang admin resume``): on all of them, or, if any may not be, on none."""

    type: Literal["job_control"] = "job_control"
    user: str
    action: JobAction
    job_ids: list[int] = Field(min_length=1, max_length=_JOBS_PER_ACTION)

    @field_validator("job_ids")
    @classmethod
    def _once_each(cls, job_ids: list[int]) -> list[int]:
        return list(dict.fromkeys(job_ids))


class JobsControlled(WireModel):
    """The jobs acted on, as they are now."""

    type: Literal["jobs_controlled"] = "jobs_controlled"
    action: JobAction
    jobs: list[JobInfo]


class Dependency(WireModel):
    """A job's whole dependency, as JobSpec's fields of it (protocol/dependency_text.py reads Slurm's text);
    checked with the rest of the job's request, as a submission is (master/job_update.py)."""

    after_ok: list[int] = []
    after_any: list[int] = []
    after_not_ok: list[int] = []
    singleton: bool = False


class JobUpdate(Tokened):
    """``user`` changes what a job asked for (``gang update``); a field left None stays as it is."""

    type: Literal["job_update"] = "job_update"
    user: str
    job_id: int
    name: str | None = Field(None, min_length=1, max_length=128)
    time_limit_s: float | None = Field(None, gt=0)
    dependency: Dependency | None = None  # the whole dependency anew
    partition: str | None = Field(None, min_length=1, max_length=64)
    priority: float | None = Field(None, ge=0, le=1)

    def changes(self) -> dict[str, object]:
        """The job spec's fields this update sets."""
        found: dict[str, object] = {}
        for field, key in (("name", "name"), ("time_limit_s", "estimate_s"), ("partition", "partition"),
                           ("priority", "priority")):
            if getattr(self, field) is not None:
                found[key] = getattr(self, field)
        if self.dependency is not None:
            found |= self.dependency.model_dump()
        return found


class JobUpdated(WireModel):
    type: Literal["job_updated"] = "job_updated"
    job: JobInfo
    changes: list[str]  # what changed, in words: "estimate_s 1:00:00 -> 30:00"


class SetLimits(Tokened):
    """Root sets a user's limits, for every partition or one (``gang admin limit``): each given field set,
    -1 lifting it; the others as they were."""

    type: Literal["set_limits"] = "set_limits"
    admin: str
    user: str = Field(min_length=1, max_length=64)
    partition: str | None = Field(None, min_length=1, max_length=64)
    max_submit_jobs: int | None = Field(None, ge=-1)
    max_jobs: int | None = Field(None, ge=-1)
    max_cpus: int | None = Field(None, ge=-1)
    max_memory: int | None = Field(None, ge=-1)

    def applied_to(self, limits: UserLimits) -> UserLimits:
        """``limits`` as this message leaves them."""
        given = {name: None if value == -1 else value
                 for name, value in self.model_dump(include=set(LIMIT_FIELDS)).items() if value is not None}
        return limits.model_copy(update={"partition": self.partition, **given})


LIMIT_FIELDS = ("max_submit_jobs", "max_jobs", "max_cpus", "max_memory")


class AdminAction(WireModel):
    """One recorded command: who, what, when, and what came of it."""

    number: int  # in the order the master took them
    time: float  # Unix time
    user: str
    command: str  # as gang would be asked for it: "admin node drain n[1-2] --reason fan"
    result: str  # "done", or "refused: " and why
    token: str | None = None  # the client's, if it gave one


class AdminLogQuery(WireModel):
    """The recorded commands numbered above ``after``, oldest first."""

    type: Literal["admin_log_query"] = "admin_log_query"
    after: int = Field(0, ge=0)
    limit: int = Field(1000, ge=1, le=10_000)


class AdminLog(WireModel):
    type: Literal["admin_log"] = "admin_log"
    actions: list[AdminAction]
    more: bool = False  # actions after the last one here: ask again with its number as ``after``
