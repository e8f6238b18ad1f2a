"""Every message of the wire protocol, one pydantic model each.

Three conversations share these models:

* node daemon <-> master, over the node's DEALER and the master's ROUTER:
  ``NodeHello`` / ``NodeWelcome``, ``LaunchTask``, ``KillTask``,
  ``CheckpointTask``, ``NodeColumn``, ``ExitAck``, ``PmiFence`` / ``PmiFenceDone`` (an MPI
  job's key-value space, exchanged at each PMI barrier) and ``ErrorReply``;
* node daemon -> master, over PUSH/PULL: ``QuantumReport``, ``Heartbeat`` and
  ``TaskExit``, in the order the node sent them;
* master -> every node, over PUB/SUB: ``SlotSwitch``, once per quantum (the rows
  to run; each node's ``NodeColumn`` of the matrix comes over its DEALER);
* client (the ``gang`` CLI, benchmarks) <-> master, request and reply over the
  ROUTER: ``Submit``, ``Cancel``, ``JobQuery``, ``NodeQuery``, ``MatrixQuery``,
  ``SwitchStatsQuery``, ``StatsQuery``, ``SetUser``, ``UserQuery``, each
  answered by its reply model or by ``ErrorReply``.

Times named ``*_ns`` are CLOCK_MONOTONIC nanoseconds (shared by processes and
containers of one host); times named ``*_time`` are Unix seconds.
"""

import re
from enum import StrEnum
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator, model_validator

from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.frames import JOBS_PER_REPLY


class _Model(BaseModel):
    # each model's validator is built when first used: a client builds the few it sends and reads
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# ---------------------------------------------------------------- shared parts

# What a command may carry, so that every job the master accepts can start: a
# NUL byte cannot reach execve, a variable name with '=' cannot be set, and a
# huge command would swell every reply that shows it. A node refuses nothing
# the master accepted for these reasons.
MAX_COMMAND_BYTES = 64 * 1024  # argv and environment together, as they reach execve
MAX_PATH_BYTES = 4096  # PATH_MAX
MAX_DEPENDENCIES = 64
MAX_ARRAY_INDEX = 100_000
MAX_ARRAY_JOBS = 1001  # one submission's array, as Slurm's default MaxArraySize
_VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]*\$?")  # what useradd takes


def _no_nul(text: str) -> str:
    if "\0" in text:
        raise ValueError("contains a NUL byte")
    return text


def _printable(text: str) -> str:
    if not text.isprintable():
        raise ValueError("contains a control character")
    return text


def _user_name(text: str) -> str:
    if not _USER_NAME.fullmatch(text):
        raise ValueError(f"{text!r} is not a Unix user name")
    return text


NoNul = Annotated[str, AfterValidator(_no_nul)]
PathText = Annotated[str, Field(min_length=1, max_length=MAX_PATH_BYTES), AfterValidator(_no_nul)]
UserName = Annotated[str, Field(min_length=1, max_length=32), AfterValidator(_user_name)]


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"  # a task exited non-zero, or could not start
    CANCELLED = "cancelled"
    NODE_FAIL = "node_fail"  # a node of the job was lost and the job was not requeued
    TIMEOUT = "timeout"  # it ran for its estimate (its time limit) and was killed

    @property
    def is_final(self) -> bool:
        return self not in (JobState.PENDING, JobState.RUNNING)


class MpiKind(StrEnum):
    """The process-manager interface a job's tasks speak (Slurm's ``--mpi``)."""

    NONE = "none"  # the GANG_* variables only
    PMI1 = "pmi1"  # the simple PMI wire protocol, version 1, over the socket in PMI_FD


class JobSpec(_Model):
    """What a user submits: ``tasks`` copies of a command, one on each of that many processors.

    ``nodes`` (Slurm's ``-N``) and ``tasks_per_node`` (``--ntasks-per-node``)
    constrain the placement: the tasks on exactly that many nodes, at most
    that many on each. Ranks on one node are consecutive (block distribution).
    """

    name: Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_printable)]
    user: UserName
    tasks: int = Field(ge=1, le=100_000)
    nodes: int | None = Field(default=None, ge=1, le=100_000)
    tasks_per_node: int | None = Field(default=None, ge=1, le=4096)
    mpi: MpiKind = MpiKind.NONE
    argv: list[NoNul] = Field(min_length=1)
    cwd: PathText | None = None  # used where it exists on the node, else the node's spool folder
    env: dict[str, NoNul] = {}
    exclusive: bool = False  # never paired with another slot
    estimate_s: float | None = Field(default=None, gt=0)  # time limit; None: the master's default
    priority: float = Field(default=0.0, ge=0, le=1)  # the user's priority UP (slack backfilling)
    migratable: bool = False  # its tasks checkpoint at barriers (jobs/runtime.py on_checkpoint)
    requeue: bool = False  # on the loss of a node, back to the queue instead of NODE_FAIL
    output: PathText | None = None  # each task's stdout+stderr, %j job, %t rank, %A array job, %a index
    # Slurm's --dependency: it waits until these jobs completed (after_ok) or ended at all (after_any);
    # if one of after_ok ends otherwise, it is cancelled
    after_ok: list[int] = Field(default=[], max_length=MAX_DEPENDENCIES)
    after_any: list[int] = Field(default=[], max_length=MAX_DEPENDENCIES)
    # a job of an array (Slurm's --array): the first job's id and this job's index, set by the master
    array_job_id: int | None = None
    array_index: int | None = Field(default=None, ge=0)

    @model_validator(mode="after")
    def _command_can_start(self) -> "JobSpec":
        if not self.argv[0]:
            raise ValueError("the command is empty")
        bad = [name for name in self.env if not _VARIABLE_NAME.fullmatch(name)]
        if bad:
            raise ValueError(f"environment variable names must be letters, digits and _: {bad[0]!r}")
        size = sum(len(text.encode()) + 1 for text in [*self.argv, *(f"{k}={v}" for k, v in self.env.items())])
        if size > MAX_COMMAND_BYTES:
            raise ValueError(f"the command and its environment take {size} bytes, over {MAX_COMMAND_BYTES}")
        return self

    @model_validator(mode="after")
    def _placement_is_possible(self) -> "JobSpec":
        if self.nodes is not None and self.nodes > self.tasks:
            raise ValueError(f"{self.tasks} tasks cannot span {self.nodes} nodes: each node needs one")
        if self.nodes is not None and self.tasks_per_node is not None and self.nodes * self.tasks_per_node < self.tasks:
            raise ValueError(f"{self.nodes} nodes with at most {self.tasks_per_node} tasks each hold "
                             f"{self.nodes * self.tasks_per_node} tasks, not {self.tasks}")
        return self


class TaskRef(_Model):
    job_id: int
    rank: int


class PeerEndpoint(_Model):
    """Where the rank-0 task on a node can bind for its job's barrier.

    ``ipc``: ``host`` is a folder on a machine all peers share (the local
    cluster). ``tcp``: ``host`` is the node's address that peers on other
    nodes reach, and the master hands out ports from ``ports`` (inclusive).
    Either way ``ports`` also gives each job a port for MASTER_PORT.
    """

    transport: Literal["ipc", "tcp"]
    host: str
    ports: tuple[int, int] | None = None

    @model_validator(mode="after")
    def _tcp_has_ports(self) -> "PeerEndpoint":
        if self.transport == "tcp" and (self.ports is None or self.ports[0] > self.ports[1]):
            raise ValueError("a tcp peer endpoint needs a port range (low, high)")
        return self


class TaskSpec(_Model):
    """One task of a job, as the master asks a node to launch it.

    ``block`` is how many ranks each node of the job runs, in node order:
    ranks are consecutive per node, so rank r's node and local rank follow
    from it (the PMI process mapping, LOCAL_RANK).
    """

    job_id: int
    rank: int
    size: int
    user: UserName  # a root node daemon runs the task as this account
    processor: int = 0  # which of the node's processors: its core, where it has one
    block: list[int] = []  # ranks per node of the job, in node order; [] is [size] on one node
    mpi: MpiKind = MpiKind.NONE
    # the job's PMI key-value space: unique across launches, since MPICH names its shared memory after it
    kvsname: str = Field(default="", max_length=256)
    rendezvous: str | None = None  # host:port of rank 0's node for MASTER_ADDR and MASTER_PORT
    argv: list[str]
    cwd: str | None
    env: dict[str, str]
    barrier_addr: str  # every rank connects here, rank 0 binds
    barrier_bind: str  # what rank 0 binds (differs from barrier_addr for tcp)
    io_addr: str | None  # the I/O server the synthetic I/O jobs write to
    output: str | None
    checkpoint: str | None = None  # where this rank saves its state when the job migrates
    restore: bool = False  # restarted from that state


class TaskSample(_Model):
    """One task's use of the quantum that just ended."""

    job_id: int
    rank: int
    cpu_ns: int  # CPU time consumed while runnable in the quantum
    runnable_ns: int  # wall time it was runnable
    progress: int  # the task's own progress counter (barriers, for rank 0)


class JobInfo(_Model):
    job_id: int
    spec: JobSpec
    state: JobState
    reason: str = ""  # why it waits or how it ended, in words
    submit_time: float
    start_time: float | None = None
    end_time: float | None = None
    node_names: list[str] = []  # rank r's node
    processors: list[int] = []  # rank r's processor on its node
    exit_code: int | None = None
    util_pct: float | None = None  # CPU utilization of its last measured quantum
    predicted_pct: float | None = None  # what the paired scheduler expects of the next
    cpu_s: float = 0.0  # CPU seconds of all its tasks so far
    barriers: int = 0  # rank 0's progress counter
    barriers_time: float | None = None  # when ``barriers`` was read
    barriers_per_s: float | None = None  # over the last few seconds
    requeues: int = 0
    ran_s: float = 0.0  # time in the quanta it ran in: what its estimate limits
    migration_s: list[float] = []  # each migration's cost: checkpoint asked -> restarted


class NodeState(StrEnum):
    UP = "up"
    DOWN = "down"


class NodeInfo(_Model):
    name: str
    state: NodeState
    cpus: float
    processors: int = 1
    processors_used: int = 0  # in the slot whose turn it is
    jobs: list[int]
    seen_ago_s: float
    util_pct: float | None = None  # CPU of its tasks over the last quantum it reported, per processor


class UserInfo(_Model):
    """A user as the administrator set them (Talby & Feitelson 1999's political priority) and what they used."""

    user: str
    political_priority: float  # PP, in [0, 1]
    quota_node_s: float | None  # node-seconds the user may use; None: no quota
    used_node_s: float  # nodes x time run, of the user's ended jobs
    over_quota: bool  # then the user's new jobs get PP = -1: infinite slack


# ------------------------------------------------------- node <-> master


class TaskExit(_Model):
    """A task ended; resent until acknowledged.

    ``error`` says why it failed where its status does not: it never started,
    it called PMI abort or spoke malformed PMI, it left before PMI finalize.
    """

    type: Literal["task_exit"] = "task_exit"
    node: str
    job_id: int
    rank: int
    returncode: int | None  # negative: killed by that signal; None: never started
    error: str | None = None
    cpu_ns: int = 0  # CPU time since the last quantum report
    progress: int = 0  # the task's final progress counter


class NodeHello(_Model):
    """A node registers, or registers again after the master restarted.

    ``tasks`` are the tasks it still runs; ``exits`` the ends not yet acknowledged.
    """

    type: Literal["node_hello"] = "node_hello"
    node: str = Field(min_length=1, max_length=64)
    cpus: float = Field(gt=0)  # the CPU share of the whole node
    processors: int = Field(default=1, ge=1, le=4096)  # columns of the matrix; a task's share is cpus/processors
    pid: int  # for the logs: in a container, a restarted daemon may have its old pid
    incarnation: str = Field(min_length=1, max_length=64)  # made anew at each start: another one has none of its tasks
    peer: PeerEndpoint
    tasks: list[TaskRef] = []
    exits: list[TaskExit] = []


class NodeWelcome(_Model):
    type: Literal["node_welcome"] = "node_welcome"
    node: str
    switch_endpoint: str  # the master's PUB socket, as bound
    report_endpoint: str  # the master's PULL socket for reports, heartbeats and exits, as bound
    heartbeat_ms: int
    quantum_ms: int


class Heartbeat(_Model):
    type: Literal["heartbeat"] = "heartbeat"
    node: str


class LaunchTask(_Model):
    type: Literal["launch_task"] = "launch_task"
    task: TaskSpec


class KillTask(_Model):
    """End a task: continue it, SIGTERM its process group, SIGKILL after a grace period."""

    type: Literal["kill_task"] = "kill_task"
    job_id: int
    reason: str


class CheckpointTask(_Model):
    """Migrate: let the task run to its next barrier, where it saves its state and exits."""

    type: Literal["checkpoint_task"] = "checkpoint_task"
    job_id: int


class ExitAck(_Model):
    type: Literal["exit_ack"] = "exit_ack"
    job_id: int
    rank: int


class PmiFence(_Model):
    """Every local rank of ``job_id`` on ``node`` entered PMI barrier ``epoch``; ``kvs``: what they put since."""

    type: Literal["pmi_fence"] = "pmi_fence"
    node: str
    job_id: int
    epoch: int = Field(ge=0)
    kvs: dict[str, str]


class PmiFenceDone(_Model):
    """Every node of the job is in barrier ``epoch``: ``kvs`` is what all of them put since the last one."""

    type: Literal["pmi_fence_done"] = "pmi_fence_done"
    job_id: int
    epoch: int
    kvs: dict[str, str]


class NodeColumn(_Model):
    """A node's column of the Ousterhout matrix: in each row (slot), the jobs with tasks on it.

    Sent to the node when it changes (a job starts, ends or moves, the rows are
    regrouped) and when the node says hello, so that a switch need only name
    rows. Never a delta: each is the whole column, and ``epoch`` tells the
    master (through the node's reports) whether the newest one arrived.
    """

    type: Literal["node_column"] = "node_column"
    epoch: int
    rows: list[list[int]]  # rows past the last one holding a job here are left out


class SlotSwitch(_Model):
    """The whole decision for one quantum, the same for every node: the rows that run, and the
    jobs of other rows that run where those rows leave processors idle (alternates).

    A node runs the jobs its column holds in those rows, and those alternates it
    holds; it stops every other task. Its size does not grow with the cluster,
    and it is never a delta: a node that missed switches converges on the next one.
    """

    type: Literal["slot_switch"] = "slot_switch"
    quantum: int
    sent_ns: int
    rows: list[int]
    alternates: list[int] = []


class QuantumReport(_Model):
    """A node's account of quantum ``quantum``, sent when the next switch arrives."""

    type: Literal["quantum_report"] = "quantum_report"
    node: str
    quantum: int  # the quantum whose switch was just applied
    switch_sent_ns: int  # echoed from that switch
    switch_applied_ns: int  # when this node had sent all its signals for it
    column_epoch: int  # of the node's column it applied the switch with (-1: it has none yet)
    # for each task runnable in the quantum before it (docs/architecture.md, 'One quantum', step 4)
    samples: list[TaskSample]


# ------------------------------------------------------- client <-> master


class Submit(_Model):
    """``token``: the client's name for this submission; sent again (a retry after a lost
    reply), it gets the job the first one made, not a second job."""

    type: Literal["submit"] = "submit"
    spec: JobSpec
    token: str | None = Field(None, min_length=1, max_length=64)
    # an array: one job per index, each with the spec's array fields set (Slurm's --array)
    array: list[Annotated[int, Field(ge=0, le=MAX_ARRAY_INDEX)]] | None = \
        Field(None, min_length=1, max_length=MAX_ARRAY_JOBS)

    @field_validator("array")
    @classmethod
    def _distinct(cls, array: list[int] | None) -> list[int] | None:
        if array is not None and len(set(array)) != len(array):
            raise ValueError("an array's indices are distinct")
        return array


class Submitted(_Model):
    """``job_id``: the job made, or an array's first; ``job_ids``: every job made, in index order."""

    type: Literal["submitted"] = "submitted"
    job_id: int
    job_ids: list[int]


class Cancel(_Model):
    type: Literal["cancel"] = "cancel"
    job_id: int
    user: str


class Cancelled(_Model):
    type: Literal["cancelled"] = "cancelled"
    job_id: int
    state: JobState


class JobQuery(_Model):
    """The listed jobs, or (``job_ids`` None) every active job and, if asked, the finished: the
    last 200, or (``ended_after``, a Unix time) every one that ended since then, as sacct's
    ``-S``. A reply holds at most JOBS_PER_REPLY jobs, the first with an id above ``after_id``."""

    type: Literal["job_query"] = "job_query"
    job_ids: list[int] | None = Field(None, max_length=JOBS_PER_REPLY)
    include_finished: bool = False
    ended_after: float | None = None
    after_id: int = 0

    @field_validator("job_ids")
    @classmethod
    def _once_each(cls, job_ids: list[int] | None) -> list[int] | None:
        return None if job_ids is None else list(dict.fromkeys(job_ids))


class JobList(_Model):
    type: Literal["job_list"] = "job_list"
    jobs: list[JobInfo]
    more: bool = False  # jobs after the last one here: ask again with its id as after_id


class NodeQuery(_Model):
    type: Literal["node_query"] = "node_query"


class NodeList(_Model):
    type: Literal["node_list"] = "node_list"
    nodes: list[NodeInfo]


class MatrixQuery(_Model):
    type: Literal["matrix_query"] = "matrix_query"


class MatrixView(_Model):
    """The Ousterhout matrix: ``rows[r][c]`` is the job in slot r on processor ``processors[c]`` of node ``nodes[c]``."""

    type: Literal["matrix_view"] = "matrix_view"
    quantum: int
    quantum_ms: int
    policy: str
    nodes: list[str]
    processors: list[int] = []  # [] : one processor per node
    rows: list[list[int | None]]
    running: list[int]  # the rows runnable now: the row whose turn it is, then its partner
    alternates: list[int] = []  # jobs of other rows running in cells both rows leave idle


class SwitchStatsQuery(_Model):
    """Per-switch latencies of the last ``last`` quanta every up node reported."""

    type: Literal["switch_stats_query"] = "switch_stats_query"
    last: int = Field(default=1000, ge=1, le=100_000)


class SwitchStats(_Model):
    type: Literal["switch_stats"] = "switch_stats"
    latencies_ns: list[int]  # master's send -> last node applied, one per quantum
    master_cpu_ns: int  # the master process's CPU time so far
    quantum: int
    busy_quanta: int = 0  # quanta in which some row ran
    partner_quanta: list[int] = []  # [slot]: quanta it ran as a partner


class StatsQuery(_Model):
    """The master's counters and histograms since it started, for its metrics."""

    type: Literal["stats_query"] = "stats_query"


class Histogram(_Model):
    """Observations in seconds: ``counts[i]`` fell at or under ``bounds[i]``, and not under the one before;
    the last count is over every bound."""

    bounds: list[float]
    counts: list[int]
    total_s: float = 0.0


class MasterStats(_Model):
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
    store_write: Histogram  # one write of a job to the store
    migrations: int
    migration_cost: Histogram  # checkpoint asked -> the job progressing on its new nodes
    cpu_s: float  # the master process's CPU time
    resident_bytes: int


class SetUser(_Model):
    """The administrator (root) sets a user's political priority and quota (``gang admin``)."""

    type: Literal["set_user"] = "set_user"
    admin: str
    user: str = Field(min_length=1, max_length=64)
    political_priority: float | None = Field(default=None, ge=0, le=1)
    quota_node_s: float | None = Field(default=None, ge=0)
    clear_quota: bool = False


class UserQuery(_Model):
    type: Literal["user_query"] = "user_query"


class UserList(_Model):
    type: Literal["user_list"] = "user_list"
    users: list[UserInfo]


class ErrorReply(_Model):
    type: Literal["error"] = "error"
    code: ErrorCode
    reason: str


Message = Annotated[
    NodeHello
    | NodeWelcome
    | Heartbeat
    | LaunchTask
    | KillTask
    | CheckpointTask
    | PmiFence
    | PmiFenceDone
    | TaskExit
    | ExitAck
    | NodeColumn
    | SlotSwitch
    | QuantumReport
    | Submit
    | Submitted
    | Cancel
    | Cancelled
    | JobQuery
    | JobList
    | NodeQuery
    | NodeList
    | MatrixQuery
    | MatrixView
    | SwitchStatsQuery
    | SwitchStats
    | StatsQuery
    | MasterStats
    | SetUser
    | UserQuery
    | UserList
    | ErrorReply,
    Field(discriminator="type"),
]
