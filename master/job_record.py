"""A job as the master tracks it, from submission to its final state, and the one owner of its life.

No other part of the master assigns a job's fields (tests/test_ownership.py holds it): they ask for a
transition by name, and each is checked against where the job is. A job is PENDING (held or not), then
RUNNING (suspended or not; its end possibly decided while its tasks still exit, ``ending``), then in a
final state; a requeue makes a new PENDING record of it, reset in one place (``requeued``).

    submitted -> [held <-> released] -> started -> placed -> [suspended <-> resumed] -> ranks gone
              -> closed                            (or requeued -> PENDING again)
    placed -> step started -> ranks gone ...       (more steps while it runs: master/job_steps.py)
    a start the store cannot write: start_postponed -> PENDING; one that cannot start: unplaced -> closed

An illegal transition is a bug of the master: tests raise it (``raise_illegal_transitions``); a running
master logs it and refuses it, the job left as it was.
"""

import dataclasses
import logging
from collections import deque
from dataclasses import dataclass, field

from gangsched.master.accounts import Use
from gangsched.master.job_steps import Step, TaskId, first_step, task_slots
from gangsched.master.waiting import Wait, WaitKind
from gangsched.policy.live_scheduler import Processor
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.protocol.messages import PmiFence
from gangsched.protocol.records import Hold, JobInfo, JobSpec, JobState, Preemption, StepSpec

log = logging.getLogger("gangsched.master")

_RATE_WINDOW_S = 10.0
_READINGS_KEPT = 256
_raising = False


class IllegalTransition(Exception):
    """A transition a job's life does not have from where the job is."""


def raise_illegal_transitions() -> None:
    """From now on an illegal transition raises (the tests), instead of being logged and refused."""
    global _raising
    _raising = True


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
    # its allocation: its rank r (step 0's, and the slot r other steps name) on node_names[r], on that node's
    # processor processors[r]
    node_names: list[str] = field(default_factory=list)
    processors: list[int] = field(default_factory=list)
    exit_code: int | None = None
    requeues: int = 0
    max_rss: int | None = None  # bytes: the largest peak of any of its tasks so far (Slurm's MaxRSS)
    # node -> the incarnation of its daemon the job's tasks were sent to (stored with its start): after a
    # master restart, a daemon of that incarnation with no trace of the job never got its launch
    launched_to: dict[str, str] = field(default_factory=dict)
    # each time a job of a higher tier or an administrator suspended it (the last one open while it is); stored
    preemptions: list[Preemption] = field(default_factory=list)
    hold: Hold | None = None  # pending and held back from its queue (gang hold), by its owner or root; stored
    steps: dict[int, Step] = field(default_factory=dict)  # what runs in its allocation, by id; stored
    # What follows lives only while the master runs.
    wait: Wait | None = None  # why it waits, while pending
    ending: JobState | None = None  # the final state decided while tasks still exit
    ran_s: float = 0.0  # in the quanta it ran in: what its estimate limits
    limit_signalled: bool = False  # its --signal was sent, its time limit that near
    migration: Migration | None = None
    migration_s: list[float] = field(default_factory=list)
    util_pct: float | None = None
    cpu_ns: int = 0
    cpu_charged_ns: int = 0  # of cpu_ns, what its user was charged: the rest goes at the next boundary or exit
    barriers: int = 0
    barriers_time: float | None = None  # Unix time of the reading
    # rank 0's readings of the last seconds, from its first (a deque each is most of a waiting job's size)
    progress_history: deque[tuple[float, int]] | None = None
    quantum_utils: dict[int, list[float]] = field(default_factory=dict)
    predictor: UtilizationPredictor = field(default_factory=UtilizationPredictor)

    # The transitions of its life (the module's docstring). Each checks where the job is first.

    def _may(self, transition: str, allowed: bool) -> bool:
        if allowed:
            return True
        where = self.state.value + (f", ending {self.ending.value}" if self.ending is not None else "")
        error = IllegalTransition(f"job {self.job_id}: {transition} while {where}")
        if _raising:
            raise error
        log.error("%s: refused", error)
        return False

    @property
    def _open(self) -> bool:
        """Pending or running: not closed."""
        return not self.state.is_final

    def waits(self, wait: Wait | None) -> None:
        """Why a pending job waits, as the part that holds it back says (None: nothing holds it back)."""
        if self._may("waits", self.state is JobState.PENDING):
            self.wait = wait

    def queued(self) -> None:
        """A pending job went to its partition's policy: nothing holds it back, nor did anything end it."""
        if self._may("queued", self.state is JobState.PENDING and self.ending is None):
            self.reason, self.wait = "", None

    def held(self, by_root: bool) -> None:
        if self._may("held", self.state is JobState.PENDING):
            self.hold = Hold.ADMIN if by_root else Hold.USER

    def released(self) -> None:
        if self._may("released", self.state is JobState.PENDING and self.hold is not None):
            self.hold = None

    def respecified(self, spec: JobSpec) -> None:
        """What was asked of it changed (``gang update``; its partition, as a restart finds the configuration)."""
        if self._may("respecified", self._open and self.ending is None):
            self.spec = spec

    def restored(self, spec: JobSpec, predictor: UtilizationPredictor) -> None:
        """Taken back from the store by a master that starts: in its partition as the configuration has it,
        a new predictor; a running job stored without the ranks it had left (a store before version 13, or a
        migration between its checkpoints and its restart) expects every rank."""
        if self._may("restored", self._open):
            self.spec, self.predictor = spec, predictor
            self.cpu_charged_ns = self.cpu_ns  # its user's account, stored with it, has it
            if self.state is JobState.RUNNING and not self.live_tasks():
                old = self.steps.get(0)
                ports = (None, None) if old is None else (old.barrier_port, old.rendezvous_port)
                self.steps[0] = first_step(self.spec, len(self.node_names), *ports)

    def started(self, wall: float) -> None:
        """The policy placed it: it runs from now on, its tasks placed next (``placed``)."""
        if self._may("started", self.state is JobState.PENDING and self.ending is None):
            self.state, self.start_time = JobState.RUNNING, wall
            self.reason, self.wait = "", None

    def placed(self, processors: list[Processor], incarnations: dict[str, str], barrier_port: int | None,
               rendezvous_port: int | None) -> None:
        """Its tasks go to ``processors`` (at its start, or its restart after a migration), rank r to the r-th,
        to the node daemons of ``incarnations``, with its barrier's port and MASTER_PORT on rank 0's node."""
        if self._may("placed", self.state is JobState.RUNNING and not self.live_tasks()):
            self.node_names = [processor.node for processor in processors]
            self.processors = [processor.number for processor in processors]
            self.launched_to = incarnations
            self.steps[0] = first_step(self.spec, len(processors), barrier_port, rendezvous_port)

    def unplaced(self) -> None:
        """Placed, it cannot start (no port for its barrier): no task was sent; it fails next."""
        if self._may("unplaced", self.state is JobState.RUNNING):
            self.node_names, self.processors = [], []
            self.steps.pop(0, None)

    def step_started(self, spec: StepSpec, barrier_port: int | None, rendezvous_port: int | None,
                     wall: float) -> Step | None:
        """A step starts in its allocation (its ``slots`` checked against it) at ``wall``: the step, numbered after
        the last; None if the job cannot take one (it is ending or moving)."""
        if not self._may("step started", self.state is JobState.RUNNING and self.ending is None
                         and self.migration is None and 0 in self.steps):
            return None
        slots = task_slots(self.spec, len(self.node_names), spec.slots)
        step = Step(self.next_step_id, slots, set(range(len(slots))), spec, barrier_port, rendezvous_port,
                    start_time=wall)
        self.steps[step.step_id] = step
        return step

    def step_unstarted(self, step_id: int) -> None:
        """The store could not write a step's start: it did not happen (no task of it was sent)."""
        if self._may("step unstarted", self.state is JobState.RUNNING and step_id in self.steps and step_id != 0):
            del self.steps[step_id]

    @property
    def next_step_id(self) -> int:
        """The id its next step gets: one more than its last."""
        return max(self.steps, default=-1) + 1

    def start_postponed(self) -> None:
        """The store could not write its start: it did not happen, and the job waits for the store."""
        if self._may("start postponed", self.state is JobState.RUNNING and self.ending is None):
            self.state, self.start_time, self.node_names, self.processors, self.steps = \
                JobState.PENDING, None, [], [], {}
            self.wait = Wait(WaitKind.START_POSTPONED)

    def ran(self, elapsed_s: float) -> Use:
        """It ran in a quantum of ``elapsed_s``: what its time limit counts; what it held in it."""
        if not self._may("ran", self.state is JobState.RUNNING):
            return Use()
        self.ran_s += elapsed_s
        spec = self.spec
        # its nodes counted only where memory is per node: this runs for every job at every boundary
        memory = spec.memory_on(len(set(self.node_names)) if spec.mem_per_node else 0)
        cpu_ns, self.cpu_charged_ns = self.cpu_ns - self.cpu_charged_ns, self.cpu_ns
        return Use(processor_s=elapsed_s * spec.processors, cpu_s=cpu_ns / 1e9, memory_byte_s=elapsed_s * memory)

    def limit_near(self, limit_s: float) -> bool:
        """Whether its ``--signal`` is due now, its time limit ``limit_s`` near enough: True once."""
        warning = self.spec.signal
        if warning is None or self.limit_signalled or self.ran_s < limit_s - warning.seconds:
            return False
        if self._may("limit near", self.state is JobState.RUNNING):
            self.limit_signalled = True
        return self.limit_signalled

    def cpu_uncharged(self) -> Use:
        """The CPU time its nodes reported since its user was last charged (a task exited: it may be its last)."""
        cpu_ns, self.cpu_charged_ns = self.cpu_ns - self.cpu_charged_ns, self.cpu_ns
        return Use(cpu_s=cpu_ns / 1e9)

    def suspended_by(self, record: Preemption) -> None:
        """Frozen whole, out of its matrix's rotation, by a job of a higher tier or an administrator."""
        if self._may("suspended", self.state is JobState.RUNNING and not self.suspended):
            self.preemptions = [*self.preemptions, record]

    def resumed(self, wall: float) -> None:
        if self._may("resumed", self.state is JobState.RUNNING and self.suspended):
            self.preemptions = [*self.preemptions[:-1], self.preemptions[-1].model_copy(update={"end": wall})]

    def migrating(self, target: list[Processor], asked: float) -> bool:
        """The policy moves it to ``target``: True if its tasks are to checkpoint now, False if a move not yet
        begun (its tasks not restarted yet) is only given a new target."""
        if not self._may("migrating", self.state is JobState.RUNNING and self.ending is None):
            return False
        if self.migration is not None and not self.migration.restarted:
            self.migration.target = target
            return False
        self.migration = Migration(target=target, asked=asked)
        return True

    def checkpointed(self, rank: int) -> None:
        if self._may("checkpointed", self.migration is not None and not self.migration.restarted):
            assert self.migration is not None
            self.migration.checkpointed.add(rank)

    def restarting(self) -> list[Processor] | None:
        """Every rank of a migrating job saved its state: where it starts again, its saved barriers noted."""
        migration = self.migration
        if migration is None or migration.restarted or len(migration.checkpointed) != len(self.node_names):
            return None
        migration.saved = self.barriers
        return migration.target

    def migrated(self, progress: int, now: float) -> float | None:
        """Rank 0 reported ``progress``: past the barrier it saved at, the move is over; what it cost (None if
        it is not over)."""
        migration = self.migration
        if migration is None or migration.saved is None or progress <= migration.saved:
            return None
        cost = now - migration.asked
        self.migration = None
        self.migration_s.append(cost)
        return cost

    def fence_entered(self, fence: PmiFence) -> list[PmiFence] | None:
        """A node's ranks of a step entered PMI barrier ``fence.epoch``: once every node of the step has, the
        fences of all of them, in the step's node order (the barrier is then over), else None."""
        step = self.steps.get(fence.step)
        if not self._may("fence entered", self.state is JobState.RUNNING and step is not None):
            return None
        assert step is not None
        return step.fence_entered(fence, step.nodes(self.node_names))

    def end_decided(self, state: JobState, reason: str, overriding: bool = False) -> bool:
        """How it ends is decided: the first cause wins (False if one came before), unless ``overriding``
        (its record cannot be stored: it fails, whatever came first). A move in flight is dropped."""
        if not self._may("end decided", self._open) or (self.ending is not None and not overriding):
            return False
        self.ending, self.reason = state, reason
        self.migration = None
        return True

    def ranks_gone(self, step_id: int, ranks: set[int], exit_code: int | None, wall: float,
                   ending: JobState | None = None) -> None:
        """Tasks of a step exited or were lost at ``wall``; ``exit_code``: the one its end reports, if this ends
        it (the job, for step 0; the step, for another); ``ending``: how the job ends, if this ends it."""
        step = self.steps.get(step_id)
        if self._may("ranks gone", self.state is JobState.RUNNING and step is not None):
            assert step is not None
            step.ranks_gone(ranks, exit_code, wall, self.ending or ending)
            if exit_code is not None and step_id == 0 and self.ending is None:
                self.exit_code = exit_code

    def command_ended(self, exit_code: int) -> None:
        """Its salloc's command ended with ``exit_code``: the job's, whatever becomes of the holder of its
        allocation (step 0) as it is ended."""
        if self._may("command ended", self._open and self.ending is None):
            self.exit_code = exit_code

    def closing(self, state: JobState, reason: str | None = None) -> None:
        """It is to end ``state`` (unless its end was decided before) once the store has it: nothing ends it
        again meanwhile; its reason (if given) says why, not why it waited."""
        if self._may("closing", self._open):
            self.ending = self.ending or state
            if reason is not None:
                self.reason = reason
            self.wait = None

    def as_closed(self, state: JobState, end_time: float) -> "Job":
        """The record of its close, for the store: this job is not changed until the store has it (``closed``)."""
        return dataclasses.replace(self, state=state, end_time=end_time,
                                   exit_code=0 if state is JobState.COMPLETED else self.exit_code)

    def closed(self, written: "Job") -> None:
        """The store took its close ``written``: the job is over."""
        if self._may("closed", self._open and written.state.is_final):
            self.state, self.end_time, self.exit_code, self.reason = \
                written.state, written.end_time, written.exit_code, written.reason

    def measures_dropped(self) -> None:
        """What its tasks gave could not be stored: dropped, as the job fails."""
        self.barriers, self.cpu_ns, self.cpu_charged_ns, self.max_rss = 0, 0, 0, None

    def requeued(self, predictor: UtilizationPredictor) -> "Job":
        """The record of the job as it goes back to its queue, for the store: no nodes, nothing measured, one
        more requeue, waiting for the reason it ended with (this record is left as it was)."""
        if not self._may("requeued", self.state is JobState.RUNNING):
            return self
        return dataclasses.replace(
            self, state=JobState.PENDING, ending=None, requeues=self.requeues + 1, node_names=[], processors=[],
            start_time=None, util_pct=None, quantum_utils={}, ran_s=0.0, limit_signalled=False,
            barriers=0, progress_history=None, predictor=predictor,
            reason="", wait=Wait(WaitKind.REQUEUED, self.reason), steps={})

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

    def measured(self, step_id: int, cpu_ns: int, memory_peak: int) -> None:
        """What a node measured of one of its tasks since the last sample: CPU time, and its memory peak, the
        job's and its step's."""
        self.cpu_ns += cpu_ns
        if memory_peak and (self.max_rss is None or memory_peak > self.max_rss):
            self.max_rss = memory_peak
        step = self.steps.get(step_id)
        if step is not None:
            step.measured(cpu_ns, memory_peak)

    def live_tasks(self) -> set[TaskId]:
        """Its tasks that have not ended, of every step."""
        return {(step.step_id, rank) for step in self.steps.values() for rank in step.live_ranks}

    def is_live(self, step_id: int, rank: int) -> bool:
        step = self.steps.get(step_id)
        return step is not None and rank in step.live_ranks

    def live_on(self, node: str) -> set[TaskId]:
        """Its tasks on ``node`` that have not ended."""
        names = self.node_names
        return {(step.step_id, rank) for step in self.steps.values() for rank in step.live_ranks
                if names[step.slots[rank]] == node}

    def running_nodes(self) -> list[str]:
        """The nodes where a task of it has not ended, sorted."""
        names = self.node_names
        return sorted({names[step.slots[rank]] for step in self.steps.values() for rank in step.live_ranks})

    def add_utilization(self, quantum: int, pct: float) -> None:
        """One task's utilization in a quantum (docs/architecture.md, 'One quantum', step 5).

        The job's utilization is the mean over its first step's tasks (all of its allocation's, or a batch
        job's batch step) once each has reported that quantum; older quanta some node never reported are
        dropped.
        """
        samples = self.quantum_utils.setdefault(quantum, [])
        samples.append(pct)
        first = self.steps.get(0)
        if first is None or len(samples) < len(first.slots):
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
        shown = self.ending if self.ending is not None and self.state is JobState.RUNNING else self.shown_state()
        return JobInfo(
            job_id=self.job_id,
            spec=self.spec,
            state=self.shown_state(),
            reason=self.shown_reason(),
            waits_for=None if self.wait is None or self.state is not JobState.PENDING else self.wait.word(),
            batch=self.spec.script is not None,
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
            steps=[step.info(self.spec, self.node_names, shown, self.start_time, self.exit_code)
                   for step in self.steps.values()] if self.steps else [],
        )
