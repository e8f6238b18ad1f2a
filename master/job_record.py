"""A job as the master tracks it, from submission to its final state."""

from collections import deque
from dataclasses import dataclass, field

from gangsched.master.waiting import Wait
from gangsched.policy.live_scheduler import Processor
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.protocol.messages import PmiFence
from gangsched.protocol.records import Hold, JobInfo, JobSpec, JobState, Preemption

_RATE_WINDOW_S = 10.0
_READINGS_KEPT = 256


@dataclass
class Migration:
    """A move in flight: the tasks checkpoint on their old nodes, start on ``target``, and it is
    over when rank 0 passes a barrier beyond the ``saved`` ones: the job makes progress again."""

    target: list[Processor]
    asked: float  # monotonic seconds
    checkpointed: set[int] = field(default_factory=set)  # ranks that saved their state
    saved: int | None = None  # the barriers passed at the checkpoint, once restarted

    @property
    def restarted(self) -> bool:
        return self.saved is not None


@dataclass(slots=True)  # a hundred thousand may wait: no instance dictionary each
class Job:
    job_id: int
    spec: JobSpec
    state: JobState
    submit_time: float
    reason: str = ""  # why it ended as it did (or, stored, why it waits: ``shown_reason``)
    start_time: float | None = None
    end_time: float | None = None
    node_names: list[str] = field(default_factory=list)  # rank r runs on node_names[r]
    processors: list[int] = field(default_factory=list)  # ... on that node's processor processors[r]
    exit_code: int | None = None
    requeues: int = 0
    barrier_port: int | None = None
    rendezvous_port: int | None = None  # MASTER_PORT on rank 0's node
    max_rss: int | None = None  # bytes: the largest peak of any of its tasks so far (Slurm's MaxRSS)
    # node -> the incarnation of its daemon the job's tasks were sent to (stored with its start): after a
    # master restart, a daemon of that incarnation with no trace of the job never got its launch
    launched_to: dict[str, str] = field(default_factory=dict)
    # each time a job of a higher tier or an administrator suspended it (the last one open while it is); stored
    preemptions: list[Preemption] = field(default_factory=list)
    hold: Hold | None = None  # pending and held back from its queue (gang hold), by its owner or root; stored
    # the ranks that have not ended; stored, so that a master that restarts expects no hello to bring a rank
    # whose end it acknowledged (master/ending.py)
    live_ranks: set[int] = field(default_factory=set)
    # What follows lives only while the master runs.
    wait: Wait | None = None  # why it waits, while pending
    ending: JobState | None = None  # the final state decided while tasks still exit
    ran_s: float = 0.0  # in the quanta it ran in: what its estimate limits
    migration: Migration | None = None
    fences: dict[int, dict[str, PmiFence]] = field(default_factory=dict)  # PMI epoch -> node -> its fence
    migration_s: list[float] = field(default_factory=list)
    util_pct: float | None = None
    cpu_ns: int = 0
    barriers: int = 0
    barriers_time: float | None = None  # Unix time of the reading
    # rank 0's readings of the last seconds, from its first (a deque each is most of a waiting job's size)
    progress_history: deque[tuple[float, int]] | None = None
    quantum_utils: dict[int, list[float]] = field(default_factory=dict)
    predictor: UtilizationPredictor = field(default_factory=UtilizationPredictor)

    @property
    def suspended(self) -> bool:
        """Suspended now, by a job of a higher tier or an administrator: frozen whole, out of its matrix's
        rotation."""
        return bool(self.preemptions) and self.preemptions[-1].end is None

    @property
    def suspended_by_admin(self) -> bool:
        """Suspended by an administrator: only ``gang admin resume`` resumes it."""
        return self.suspended and self.preemptions[-1].by_user is not None

    def shown_state(self) -> JobState:
        """The state users read: a running job the scheduler or an administrator suspended shows as such."""
        return JobState.SUSPENDED if self.suspended else self.state

    def shown_reason(self) -> str:
        """The reason users read: why it waits, while it does, else why it ended as it did."""
        if self.suspended:
            last = self.preemptions[-1]
            return f"Suspended by {last.by_user}" if last.by_user is not None else f"Preempted by job {last.by_job}"
        return self.wait.text() if self.wait is not None else self.reason

    def measured(self, cpu_ns: int, memory_peak: int) -> None:
        """What a node measured of one of its tasks since the last sample: CPU time, and its memory peak."""
        self.cpu_ns += cpu_ns
        if memory_peak and (self.max_rss is None or memory_peak > self.max_rss):
            self.max_rss = memory_peak

    def add_utilization(self, quantum: int, pct: float) -> None:
        """One task's utilization in a quantum (docs/architecture.md, 'One quantum', step 5).

        The job's utilization is the mean over its tasks once every rank has
        reported that quantum; older quanta some node never reported are dropped.
        """
        samples = self.quantum_utils.setdefault(quantum, [])
        samples.append(pct)
        if len(samples) < len(self.node_names):
            return
        self.util_pct = sum(samples) / len(samples)
        self.predictor.observe(self.util_pct)
        for done in [q for q in self.quantum_utils if q <= quantum]:
            del self.quantum_utils[done]

    def record_progress(self, now: float, wall: float, barriers: int) -> None:
        """Rank 0's counter; a lower reading is a task just restarted from a checkpoint, not yet caught up."""
        if barriers < self.barriers:
            return
        self.barriers, self.barriers_time = barriers, wall
        history = self.progress_history
        if history is None:
            history = self.progress_history = deque(maxlen=_READINGS_KEPT)
        history.append((now, barriers))
        while history and now - history[0][0] > _RATE_WINDOW_S:
            history.popleft()

    def barriers_per_s(self) -> float | None:
        history = self.progress_history
        if history is None or len(history) < 2:
            return None
        (t0, b0), (t1, b1) = history[0], history[-1]
        return (b1 - b0) / (t1 - t0) if t1 > t0 else None

    def info(self) -> JobInfo:
        return JobInfo(
            job_id=self.job_id,
            spec=self.spec,
            state=self.shown_state(),
            reason=self.shown_reason(),
            submit_time=self.submit_time,
            start_time=self.start_time,
            end_time=self.end_time,
            node_names=self.node_names,
            processors=self.processors,
            exit_code=self.exit_code,
            util_pct=self.util_pct,
            predicted_pct=self.predictor.predict() if self.state is JobState.RUNNING else None,
            cpu_s=self.cpu_ns / 1e9,
            barriers=self.barriers,
            barriers_time=self.barriers_time,
            barriers_per_s=self.barriers_per_s(),
            requeues=self.requeues,
            ran_s=self.ran_s,
            migration_s=self.migration_s,
            max_rss=self.max_rss,
            preemptions=self.preemptions,
            hold=self.hold,
        )
