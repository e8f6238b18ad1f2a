"""The messages of the client protocol: a client (the ``gang`` CLI, benchmarks, the web view)
asks the master over its ROUTER, and is answered by the reply model or ``ErrorReply`` (which
answers nodes too).

Times named ``*_time`` are Unix seconds.
"""

from typing import Literal

from pydantic import Field, field_validator, model_validator

from gangsched.protocol.array_ranges import IndexRange, array_problem, array_size
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.frames import JOBS_PER_REPLY
from gangsched.protocol.records import (
    JobInfo,
    JobSpec,
    JobState,
    MpiKind,
    NodeInfo,
    PartitionInfo,
    StepId,
    UserInfo,
    WireModel,
)


class Submit(WireModel):
    """``token``: the client's name for this submission; sent again (a retry after a lost
    reply), it gets the job the first one made, not a second job."""

    type: Literal["submit"] = "submit"
    spec: JobSpec
    token: str | None = Field(None, min_length=1, max_length=64)
    # an array: one job per index of these ranges (first, last, step), each with the spec's array fields
    # set (Slurm's --array); at most ``array_limit`` of them run at once (its %N)
    array: list[IndexRange] | None = None
    array_limit: int | None = Field(None, ge=1)
    hold: bool = False  # the jobs wait held by their owner until released (Slurm's -H)

    @model_validator(mode="after")
    def _an_array(self) -> "Submit":
        if self.array is not None:
            problem = array_problem(self.array)
            if problem is not None:
                raise ValueError(problem)
        if self.array_limit is not None and (self.array is None or self.array_limit > array_size(self.array)):
            raise ValueError("a throttle (array_limit) is for an array, at most its size")
        return self


class Submitted(WireModel):
    """``job_id``: the job made, or an array's first; ``count``: how many were made, with consecutive ids
    in index order (an array may have millions: their ids are not listed)."""

    type: Literal["submitted"] = "submitted"
    job_id: int
    count: int = Field(1, ge=1)

    @property
    def job_ids(self) -> list[int]:
        return list(range(self.job_id, self.job_id + self.count))


class Cancel(WireModel):
    """End a job: it is cancelled, or, with ``command_exit``, salloc's command ended with that exit code and its
    allocation is released: the job completes (0) or fails with it, as Slurm's salloc ends its job."""

    type: Literal["cancel"] = "cancel"
    job_id: int
    user: str
    command_exit: int | None = Field(default=None, ge=-64, le=255)  # a signal's number negative, as exits


class SignalJob(WireModel):
    """Send a running job's tasks a signal (scancel --signal): by default every step's but a batch job's batch
    step; ``batch``: its batch step's first process alone (the script's shell); ``full``: every step's, the
    batch step's whole too; ``step``: that step's alone, every process of it (srun's own step)."""

    type: Literal["signal_job"] = "signal_job"
    job_id: int
    user: str
    signal: int = Field(ge=1, le=64)
    batch: bool = False
    full: bool = False
    step: StepId | None = None


class Signalled(WireModel):
    type: Literal["signalled"] = "signalled"
    job_id: int
    nodes: list[str]  # those its signal went to


class Cancelled(WireModel):
    type: Literal["cancelled"] = "cancelled"
    job_id: int
    state: JobState
    # its running tasks were ordered killed: the job ends whatever becomes of the store's writes, so the
    # answer goes out even while the store cannot commit (master/outgoing.py)
    killed: bool = False


class JobQuery(WireModel):
    """The listed jobs, or (``job_ids`` None) every active job and, if asked, the finished: the
    last 200, or (``ended_after``, a Unix time) every one that ended since then, as sacct's
    ``-S``. A reply holds at most JOBS_PER_REPLY jobs, the first with an id above ``after_id``."""

    type: Literal["job_query"] = "job_query"
    job_ids: list[int] | None = Field(None, max_length=JOBS_PER_REPLY)
    include_finished: bool = False
    ended_after: float | None = None
    after_id: int = 0
    # (``job_ids`` None) only the jobs in these states, of this user; ``arrays``: each array's pending jobs
    # as one, the first of them, with ``JobInfo.array_pending`` (as squeue shows them, unless -r)
    states: list[JobState] | None = None
    user: str | None = None
    partition: str | None = None
    arrays: bool = False
    # who asks: with keys the master sets it to the key's user, whatever was sent; another user's job then
    # shows them no environment, argv or working folder (the master's --private-job-details)
    viewer: str | None = None
    brief: bool = False  # the jobs without their environments and batch scripts, as listings show them

    @field_validator("job_ids")
    @classmethod
    def _once_each(cls, job_ids: list[int] | None) -> list[int] | None:
        return None if job_ids is None else list(dict.fromkeys(job_ids))


class JobList(WireModel):
    type: Literal["job_list"] = "job_list"
    jobs: list[JobInfo]
    more: bool = False  # jobs after the last one here: ask again with its id as after_id


class JobCountQuery(WireModel):
    """How many jobs the master holds, by state, partition and (pending ones) the reason they wait: for the
    metrics, which a listing of every job would make cost the master the square of the queue's depth."""

    type: Literal["job_count_query"] = "job_count_query"


class JobCount(WireModel):
    state: JobState  # pending, running or suspended
    partition: str
    reason: str  # why they wait (JobInfo.reason), for pending jobs; "" otherwise
    count: int = Field(ge=1)


class JobCounts(WireModel):
    type: Literal["job_counts"] = "job_counts"
    counts: list[JobCount]


class NodeQuery(WireModel):
    type: Literal["node_query"] = "node_query"


class NodeList(WireModel):
    type: Literal["node_list"] = "node_list"
    nodes: list[NodeInfo]
    mpi_default: MpiKind = MpiKind.NONE  # what a job that names no --mpi gets
    partitions: list[PartitionInfo] = []
    cluster: str = "gangsched"  # the cluster's name, as tasks' SLURM_CLUSTER_NAME gives it


class MatrixQuery(WireModel):
    type: Literal["matrix_query"] = "matrix_query"
    partition: str | None = None  # None: the default partition's


class MatrixView(WireModel):
    """The Ousterhout matrix: ``rows[r][c]`` is the job in slot r on processor ``processors[c]`` of
    node ``nodes[c]``."""

    type: Literal["matrix_view"] = "matrix_view"
    partition: str
    quantum: int
    quantum_ms: int
    policy: str
    nodes: list[str]
    processors: list[int] = []  # [] : one processor per node
    rows: list[list[int | None]]
    running: list[int]  # the rows runnable now: the row whose turn it is, then its partner
    alternates: list[int] = []  # jobs of other rows running in cells both rows leave idle


class SwitchStatsQuery(WireModel):
    """Per-switch latencies of the last ``last`` quanta every up node reported."""

    type: Literal["switch_stats_query"] = "switch_stats_query"
    last: int = Field(default=1000, ge=1, le=100_000)


class SwitchStats(WireModel):
    type: Literal["switch_stats"] = "switch_stats"
    latencies_ns: list[int]  # master's send -> last node applied, one per quantum
    master_cpu_ns: int  # the master process's CPU time so far
    quantum: int
    busy_quanta: int = 0  # quanta in which some row ran
    partner_quanta: list[int] = []  # [slot]: quanta it ran as a partner


class StatsQuery(WireModel):
    """The master's counters and histograms since it started, for its metrics."""

    type: Literal["stats_query"] = "stats_query"


class Histogram(WireModel):
    """Observations in seconds: ``counts[i]`` fell at or under ``bounds[i]``, and not under the one before;
    the last count is over every bound."""

    bounds: list[float]
    counts: list[int]
    total_s: float = 0.0


class MasterStats(WireModel):
    type: Literal["master_stats"] = "master_stats"
    start_time: float
    quanta: int  # slot switches sent
    busy_quanta: int  # ... in which some row ran
    paired_quanta: int  # ... in which a partner row ran too
    scheduling_events: int
    switch_latency: Histogram  # a switch's send -> the last node having applied it
    scheduling: Histogram  # one scheduling event's decisions
    quantum_decision: Histogram  # one quantum boundary: the rows to run, the columns, the switch
    report_drain: Histogram  # one read of every waiting node message (reports, heartbeats, exits)
    store_write: Histogram  # one synced commit of the store (the writes of one turn of the loop)
    store_failures: int = 0  # writes the store failed (each retried: master/closing.py)
    migrations: int
    migration_cost: Histogram  # checkpoint asked -> the job progressing on its new nodes
    cpu_s: float  # the master process's CPU time
    resident_bytes: int


class SetUser(WireModel):
    """The administrator (root) sets a user's political priority and quota (``gang admin``)."""

    type: Literal["set_user"] = "set_user"
    admin: str
    user: str = Field(min_length=1, max_length=64)
    political_priority: float | None = Field(default=None, ge=0, le=1)
    quota_processor_s: float | None = Field(default=None, ge=0)
    clear_quota: bool = False


class Reconfigure(WireModel):
    """The administrator (root) has the master read its configuration file again (``gang admin
    reconfigure``, Slurm's ``scontrol reconfigure``)."""

    type: Literal["reconfigure"] = "reconfigure"
    admin: str


class Reconfigured(WireModel):
    """What a reconfiguration changed, in words, one line each; the partitions it left."""

    type: Literal["reconfigured"] = "reconfigured"
    config: str  # the file read
    partitions: list[str]
    changes: list[str]


class UserQuery(WireModel):
    type: Literal["user_query"] = "user_query"


class UserList(WireModel):
    type: Literal["user_list"] = "user_list"
    users: list[UserInfo]


class ErrorReply(WireModel):
    type: Literal["error"] = "error"
    code: ErrorCode
    reason: str

    @classmethod
    def nothing_changed(cls, code: ErrorCode, reason: str) -> "ErrorReply":
        """A command refused whole: its reason, and that nothing of it was done."""
        return cls(code=code, reason=f"{reason}: nothing changed")
