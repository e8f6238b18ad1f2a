"""Every message of the wire protocol, one pydantic model each.

Three conversations share these models:

* node daemon <-> master, over the node's DEALER and the master's ROUTER:
  ``NodeHello`` / ``NodeWelcome``, ``LaunchTask``, ``KillTask``,
  ``CheckpointTask``, ``NodeColumn``, ``ExitAck``, ``PmiFence`` / ``PmiFenceDone`` (an MPI
  job's key-value space, exchanged at each PMI barrier), ``PmixModexRequest`` /
  ``PmixModexReply`` (a rank's PMIx data, asked of its node through the master) and
  ``ErrorReply``;
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

from typing import Annotated, Literal, NamedTuple

from pydantic import Field, field_validator

from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.frames import JOBS_PER_REPLY
from gangsched.protocol.records import (
    MAX_ARRAY_INDEX,
    MAX_ARRAY_JOBS,
    JobInfo,
    JobSpec,
    JobState,
    MpiKind,
    NodeInfo,
    PeerEndpoint,
    RelayEndpoints,
    TaskRef,
    TaskSample,
    TaskSpec,
    UserInfo,
    WireModel,
)
from gangsched.protocol.sizes import LARGEST

MAX_REPORT_QUANTA = 64  # accounts in one QuantumReport


# ------------------------------------------------------- node <-> master


class TaskExit(WireModel):
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
    memory_peak: int = 0  # bytes: the most its processes held resident at once (Slurm's MaxRSS)
    out_of_memory: bool = False  # it passed its memory limit and was killed for it


class NodeHello(WireModel):
    """A node registers, or registers again after the master restarted.

    ``tasks`` are the tasks it still runs; ``exits`` the ends not yet acknowledged.
    """

    type: Literal["node_hello"] = "node_hello"
    node: str = Field(min_length=1, max_length=64)
    cpu_share: float = Field(gt=0)  # of one CPU's time, the whole node's (not a count of CPUs)
    processors: int = Field(default=1, ge=1, le=4096)  # columns of the matrix; a task's share is cpu_share/processors
    pid: int  # for the logs: in a container, a restarted daemon may have its old pid
    incarnation: str = Field(min_length=1, max_length=64)  # made anew at each start: another one has none of its tasks
    peer: PeerEndpoint
    tasks: list[TaskRef] = []
    exits: list[TaskExit] = []
    relay: RelayEndpoints | None = None  # where it would listen as a relay; None: it cannot relay
    left_relay: str | None = None  # the relay it heard no switch through for too long
    mpi: list[MpiKind] = []  # the process-manager interfaces it serves (besides none)
    memory: int = Field(ge=1, le=LARGEST)  # bytes its jobs may commit (gang noded --memory)
    host_memory: int = Field(ge=1, le=LARGEST)  # bytes its host has: a node may not declare more


class NodeWelcome(WireModel):
    type: Literal["node_welcome"] = "node_welcome"
    node: str
    switch_endpoint: str  # the master's PUB socket as bound, or its relay's
    report_endpoint: str  # the master's PULL socket for reports, heartbeats and exits as bound, or its relay's
    heartbeat_ms: int
    quantum_ms: int
    via: str | None = None  # the node it reaches the master through; None: the master itself
    relays: bool = False  # it forwards switches and node messages for the nodes homed at it


class Heartbeat(WireModel):
    type: Literal["heartbeat"] = "heartbeat"
    node: str


class LaunchTask(WireModel):
    type: Literal["launch_task"] = "launch_task"
    task: TaskSpec


class KillTask(WireModel):
    """End a task: continue it, SIGTERM its process group, SIGKILL after a grace period."""

    type: Literal["kill_task"] = "kill_task"
    job_id: int
    reason: str


class CheckpointTask(WireModel):
    """Migrate: let the task run to its next barrier, where it saves its state and exits."""

    type: Literal["checkpoint_task"] = "checkpoint_task"
    job_id: int


class ExitAck(WireModel):
    type: Literal["exit_ack"] = "exit_ack"
    job_id: int
    rank: int


class PmiFence(WireModel):
    """Every local rank of ``job_id`` on ``node`` entered PMI fence ``epoch``; ``kvs``: what they put since
    (PMI-1, PMI-2); ``data``: the PMIx library's blob for this node."""

    type: Literal["pmi_fence"] = "pmi_fence"
    node: str
    job_id: int
    epoch: int = Field(ge=0)
    kvs: dict[str, str]
    data: bytes = b""


class PmiFenceDone(WireModel):
    """Every node of the job is in barrier ``epoch``: ``kvs`` is what all of them put since the last one."""

    type: Literal["pmi_fence_done"] = "pmi_fence_done"
    job_id: int
    epoch: int
    kvs: dict[str, str]
    data: bytes = b""  # every node's ``data``, concatenated in the job's node order


class PmixModexRequest(WireModel):
    """A node's PMIx library asks for ``rank``'s data (direct modex); the master passes it to the rank's node,
    which answers with a ``PmixModexReply``. ``request`` is the asking node's number for it."""

    type: Literal["pmix_modex_request"] = "pmix_modex_request"
    node: str  # the asking node
    job_id: int
    rank: int = Field(ge=0)
    request: int


class PmixModexReply(WireModel):
    """The data of ``rank``, from its node, for the node that asked; the master passes it on."""

    type: Literal["pmix_modex_reply"] = "pmix_modex_reply"
    node: str  # the rank's node, which answers
    asker: str
    job_id: int
    rank: int = Field(ge=0)
    request: int
    status: int  # the library's (0: found)
    data: bytes = b""


class NodeColumn(WireModel):
    """A node's column of the Ousterhout matrix: in each row (slot), the jobs with tasks on it.

    Sent to the node when it changes (a job starts, ends or moves, the rows are
    regrouped) and when the node says hello, so that a switch need only name
    rows. Never a delta: each is the whole column, and ``epoch`` tells the
    master (through the node's reports) whether the newest one arrived.
    """

    type: Literal["node_column"] = "node_column"
    epoch: int
    rows: list[list[int]]  # rows past the last one holding a job here are left out


class SlotSwitch(WireModel):
    """The whole decision for one quantum, the same for every node: the rows that run, and the
    jobs of other rows that run where those rows leave processors idle (alternates).

    A node runs the jobs its column holds in those rows, and those alternates it
    holds; it stops every other task. Its size does not grow with the cluster,
    and it is never a delta: a node that missed switches converges on the next one.
    ``report_every``: a node sends its accounts of the quanta once it holds this many
    (the master raises it with the cluster, so that it reads a bounded number of
    reports per quantum).
    """

    type: Literal["slot_switch"] = "slot_switch"
    quantum: int
    sent_ns: int
    rows: list[int]
    alternates: list[int] = []
    report_every: int = Field(1, ge=1, le=MAX_REPORT_QUANTA)


class QuantumAccount(NamedTuple):
    """What a node did in quantum ``quantum``: when it applied that quantum's switch, and
    what its tasks used in the quantum before it. A tuple, as TaskSample is: the report
    that holds it validates it."""

    quantum: int  # the quantum whose switch was applied
    switch_sent_ns: int  # echoed from that switch
    switch_applied_ns: int  # when this node had sent all its signals for it
    column_epoch: int  # of the node's column it applied the switch with (-1: it has none yet)
    # for each task runnable in the quantum before it (docs/architecture.md, 'One quantum', step 4)
    samples: list[TaskSample]


class QuantumReport(WireModel):
    """A node's accounts of its last quanta, oldest first: one, or ``report_every`` of them."""

    type: Literal["quantum_report"] = "quantum_report"
    node: str
    accounts: list[QuantumAccount] = Field(min_length=1, max_length=MAX_REPORT_QUANTA)


# ------------------------------------------------------- client <-> master


class Submit(WireModel):
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


class Submitted(WireModel):
    """``job_id``: the job made, or an array's first; ``job_ids``: every job made, in index order."""

    type: Literal["submitted"] = "submitted"
    job_id: int
    job_ids: list[int]


class Cancel(WireModel):
    type: Literal["cancel"] = "cancel"
    job_id: int
    user: str


class Cancelled(WireModel):
    type: Literal["cancelled"] = "cancelled"
    job_id: int
    state: JobState


class JobQuery(WireModel):
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


class JobList(WireModel):
    type: Literal["job_list"] = "job_list"
    jobs: list[JobInfo]
    more: bool = False  # jobs after the last one here: ask again with its id as after_id


class NodeQuery(WireModel):
    type: Literal["node_query"] = "node_query"


class NodeList(WireModel):
    type: Literal["node_list"] = "node_list"
    nodes: list[NodeInfo]
    mpi_default: MpiKind = MpiKind.NONE  # what a job that names no --mpi gets


class MatrixQuery(WireModel):
    type: Literal["matrix_query"] = "matrix_query"


class MatrixView(WireModel):
    """The Ousterhout matrix: ``rows[r][c]`` is the job in slot r on processor ``processors[c]`` of
    node ``nodes[c]``."""

    type: Literal["matrix_view"] = "matrix_view"
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
    store_write: Histogram  # one write of a job to the store
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
    quota_node_s: float | None = Field(default=None, ge=0)
    clear_quota: bool = False


class UserQuery(WireModel):
    type: Literal["user_query"] = "user_query"


class UserList(WireModel):
    type: Literal["user_list"] = "user_list"
    users: list[UserInfo]


class ErrorReply(WireModel):
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
    | PmixModexRequest
    | PmixModexReply
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
