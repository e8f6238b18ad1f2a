"""The messages of the node protocol: node daemon <-> master over the DEALER and ROUTER, node ->
master over PUSH/PULL, master -> every node over PUB/SUB (protocol/messages.py says which goes where).

Times named ``*_ns`` are CLOCK_MONOTONIC nanoseconds (shared by processes and
containers of one host); times named ``*_time`` are Unix seconds.
"""

from typing import Literal, NamedTuple

from pydantic import Field

from gangsched.protocol.leadership_messages import FromLeader
from gangsched.protocol.records import (
    MAX_PROGRESS,
    MpiKind,
    PeerEndpoint,
    RelayEndpoints,
    StepId,
    TaskRef,
    TaskSample,
    TaskSpec,
    WireModel,
)
from gangsched.protocol.sizes import LARGEST

MAX_REPORT_QUANTA = 64  # accounts in one QuantumReport


class TaskExit(WireModel):
    """A task ended; resent until acknowledged.

    ``error`` says why it failed where its status does not: it never started,
    it called PMI abort or spoke malformed PMI, it left before PMI finalize.
    """

    type: Literal["task_exit"] = "task_exit"
    node: str
    job_id: int
    rank: int
    step: StepId = 0
    returncode: int | None  # negative: killed by that signal; None: never started
    error: str | None = Field(default=None, max_length=4096)  # why it failed, where its status does not say
    cpu_ns: int = 0  # CPU time since the last quantum report
    progress: int = Field(default=0, ge=0, le=MAX_PROGRESS)  # the task's final progress counter
    memory_peak: int = 0  # bytes: the most its processes held resident at once (Slurm's MaxRSS)
    out_of_memory: bool = False  # it passed its memory limit and was killed for it


class NodeHello(WireModel):
    """A node registers, or registers again after the master restarted.

    ``tasks`` are the tasks it still runs; ``exits`` the ends not yet acknowledged. ``welcomed``: the
    welcomes it had had when it sent this hello. A daemon repeats its hello until welcomed, so a hello
    can reach a master after that master's welcome to an earlier one, and after the launches and the
    reports that followed it (the reports take another socket); such a hello had fewer welcomes than
    the master sent this daemon, and the master takes its tasks for the old news they are.
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
    welcomed: int = Field(0, ge=0)  # welcomes this daemon (this incarnation) had had, from any master


class NodeWelcome(FromLeader):
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
    stale_refused: int = Field(0, ge=0)  # messages of an older leader's epoch it refused since it started


class LaunchTask(FromLeader):
    type: Literal["launch_task"] = "launch_task"
    task: TaskSpec
    # start it running if the switch in force where it arrives is this one (by its number), or the next
    # the node applies is: no other job's task runs on its processor in that switch's quantum. A launch
    # held back by the master (its store could not commit) may arrive switches later, when another
    # task may run there. Else (None) it starts as the switch in force says: stopped unless that runs it.
    run_in: int | None = Field(None, ge=0)


class KillTask(FromLeader):
    """End a job's tasks here, or one step's: continue them, SIGTERM their process groups, SIGKILL after a
    grace period."""

    type: Literal["kill_task"] = "kill_task"
    job_id: int
    reason: str
    step: StepId | None = None  # None: every step of the job


class SignalTask(FromLeader):
    """Send a job's tasks here a signal (scancel --signal): those of ``steps`` (None: every step), each to its
    every process (``whole``) or to its first alone; a descheduled task takes it when it runs again."""

    type: Literal["signal_task"] = "signal_task"
    job_id: int
    signal: int = Field(ge=1, le=64)
    steps: list[StepId] | None = None
    whole: bool = True


class CheckpointTask(FromLeader):
    """Migrate: let the tasks of the job's first step run to their next barrier, where each saves its state
    and exits (the master ends its other steps first)."""

    type: Literal["checkpoint_task"] = "checkpoint_task"
    job_id: int


class ExitAck(FromLeader):
    type: Literal["exit_ack"] = "exit_ack"
    job_id: int
    rank: int
    step: StepId = 0


class PmiFence(WireModel):
    """Every local rank of step ``step`` of ``job_id`` on ``node`` entered PMI fence ``epoch`` (each step is an
    MPI world of its own); ``kvs``: what they put since (PMI-1, PMI-2); ``data``: the PMIx library's blob for
    this node."""

    type: Literal["pmi_fence"] = "pmi_fence"
    node: str
    job_id: int
    step: StepId = 0
    epoch: int = Field(ge=0)
    kvs: dict[str, str]
    data: bytes = b""


class PmiFenceDone(FromLeader):
    """Every node of the job is in barrier ``epoch``: ``kvs`` is what all of them put since the last one."""

    type: Literal["pmi_fence_done"] = "pmi_fence_done"
    job_id: int
    step: StepId = 0
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
    step: StepId = 0
    request: int


class PmixModexReply(WireModel):
    """The data of ``rank``, from its node, for the node that asked; the master passes it on."""

    type: Literal["pmix_modex_reply"] = "pmix_modex_reply"
    node: str  # the rank's node, which answers
    asker: str
    job_id: int
    rank: int = Field(ge=0)
    step: StepId = 0
    request: int
    status: int  # the library's (0: found)
    data: bytes = b""


class NodeColumn(FromLeader):
    """A node's column of each Ousterhout matrix it is in (one per partition, by the partition's
    name): in each row (slot), the jobs with tasks on it.

    Sent to the node when it changes (a job starts, ends, moves or is suspended,
    the rows are regrouped) and when the node says hello, so that a switch need
    only name rows. Never a delta: each is the whole column, and ``epoch`` tells
    the master (through the node's reports) whether the newest one arrived.
    """

    type: Literal["node_column"] = "node_column"
    epoch: int
    # partition -> its rows here; rows past the last one holding a job here are left out
    rows: dict[str, list[list[int]]]


class SlotSwitch(FromLeader):
    """The whole decision for one quantum, the same for every node: the rows that run in each
    matrix, and the jobs of other rows that run where those rows leave processors idle
    (alternates). Each partition's matrix switches at its own quantum's boundaries; a switch
    goes out at each boundary of any of them, with the rows every matrix runs then.

    A node runs the jobs its column holds in those rows, and those alternates it
    holds; it stops every other task. Its size does not grow with the cluster,
    and it is never a delta: a node that missed switches converges on the next one.
    ``report_every``: a node sends its accounts of the quanta once it holds this many
    (the master raises it with the cluster, so that it reads a bounded number of
    reports per quantum).
    """

    type: Literal["slot_switch"] = "slot_switch"
    quantum: int  # this switch's number: one more than the last, whichever matrix's boundary it is
    sent_ns: int
    rows: dict[str, list[int]]  # partition -> the rows that run in its matrix
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
