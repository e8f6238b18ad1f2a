"""The steps of a job: each a launch of tasks over some or all of its allocation's processors.

A job is an allocation (its processors in a matrix row, its memory, its limits, its accounting:
master/job_record.py) that runs steps. Step 0 is the job's own command over every task of the
allocation, what ``gang submit`` runs; a step started in the running job (``StartStep``) runs its
command on the allocation's tasks it names (``slots``). Each step is an MPI world of its own: its
ranks, their exits, its PMI fences, its barrier's port and MASTER_PORT. Every step's tasks are the
job's on their nodes, so the switch that freezes or thaws the job freezes or thaws them all.

The job's life follows its first step: when step 0 ends, the job ends as it did, and the other
steps still running are ended with it. A task of another step that fails ends its step, not the job. A step
(or a job's step 0) that does not kill on a bad exit (srun without -K, as Slurm's) lets its other tasks run on
after a failure, and ends with the worst once they all have.
"""

from dataclasses import dataclass, field

from gangsched.protocol.messages import PmiFence
from gangsched.protocol.records import JobSpec, JobState, StepInfo, StepSpec, TaskFailure

TaskId = tuple[int, int]  # (step, rank): a task of a job


@dataclass(slots=True)
class Step:
    step_id: int
    # its rank r runs on the allocation's processors from slots[r] on: one, or its job's cpus_per_task (-c)
    slots: list[int]
    live_ranks: set[int]  # stored, so that a master that restarts expects no hello to bring an ended rank
    spec: StepSpec | None = None  # what it runs; None: the job's own command (step 0)
    barrier_port: int | None = None
    rendezvous_port: int | None = None  # MASTER_PORT on its rank 0's node
    exit_code: int | None = None  # why it ended, if a task of it failed (step 0's is the job's)
    cpu_ns: int = 0  # what its tasks used, as reported (the job's use is every step's)
    max_rss: int = 0  # bytes: the largest peak of any of its tasks so far
    start_time: float | None = None  # Unix time (step 0 starts with its job: the job's)
    end_time: float | None = None  # when its last task ended
    state: JobState | None = None  # how it ended, once it has (step 0 ends as its job does)
    # without --kill-on-bad-exit: its worst failure so far, (how it ends the step, why, its exit code)
    failure: tuple[JobState, str, int | None] | None = None
    failed_tasks: dict[int, int] = field(default_factory=dict)  # rank -> its exit status other than 0 (-signal)
    fences: dict[int, dict[str, PmiFence]] = field(default_factory=dict)  # PMI epoch -> node -> its fence

    def ranks_gone(self, ranks: set[int], exit_code: int | None, wall: float, job_ending: JobState | None) -> None:
        """Its ``ranks`` ended at ``wall``; ``exit_code``: why it ended, if one of them failed (the first failure
        is kept); ``job_ending``: how its job ends, if that was decided (a step killed because its job ends ends
        as the job does, or CANCELLED where the job completes, as Slurm's steps do)."""
        self.live_ranks -= ranks
        if exit_code is not None and self.exit_code is None:
            self.exit_code = exit_code
        if self.live_ranks or self.end_time is not None:
            return
        self.end_time = wall
        if self.exit_code == 0 or (self.exit_code is None and job_ending is None):
            self.state = JobState.COMPLETED
        elif job_ending is None:
            self.state = JobState.FAILED
        else:
            self.state = JobState.CANCELLED if job_ending is JobState.COMPLETED else job_ending

    def failure_carried(self, rank: int, failure: tuple[JobState, str] | None,
                        exit_code: int | None) -> tuple[tuple[JobState, str] | None, int | None]:
        """A step that does not kill on a bad exit: its task ``rank`` ended (``failure``: how, if it failed). The
        failure is kept if it is the worst so far (the highest exit status, a signal's as 128 + its number, as
        Slurm's srun says it) while other tasks run on; once its last task ends, the worst failure ends the
        step. What this end then brings: (the failure that ends the step, if any; the exit code it reports)."""
        if failure is not None and (self.failure is None or _status(exit_code) > _status(self.failure[2])):
            self.failure = (*failure, exit_code)
        if self.live_ranks - {rank} or self.failure is None:
            return None, exit_code
        state, reason, worst = self.failure
        return (state, reason), worst

    def task_failed(self, rank: int, returncode: int) -> None:
        self.failed_tasks[rank] = returncode

    def measured(self, cpu_ns: int, memory_peak: int) -> None:
        self.cpu_ns += cpu_ns
        if memory_peak > self.max_rss:
            self.max_rss = memory_peak

    def fence_entered(self, fence: PmiFence, nodes: list[str]) -> list[PmiFence] | None:
        """A node's ranks of it entered PMI barrier ``fence.epoch``: once all its ``nodes`` have, their fences in
        that order (the barrier is then over), else None."""
        entered = self.fences.setdefault(fence.epoch, {})
        entered[fence.node] = fence
        if len(entered) < len(nodes):
            return None
        del self.fences[fence.epoch]
        return [entered[node] for node in nodes]

    def node_of(self, rank: int, node_names: list[str]) -> str:
        return node_names[self.slots[rank]]

    def nodes(self, node_names: list[str]) -> list[str]:
        """Its nodes in the order of its ranks, once each."""
        return list(dict.fromkeys(node_names[slot] for slot in self.slots))

    def info(self, job_spec: JobSpec, node_names: list[str], job_state: JobState, job_start: float | None,
             job_exit: int | None) -> StepInfo:
        """The step as a user reads it; step 0 (the job's own command, or its batch script) starts, ends and
        exits as its job: ``job_state`` is how the job ends, or its state as shown."""
        argv = job_spec.argv if self.spec is None else self.spec.argv
        if self.live_ranks:
            state = JobState.SUSPENDED if job_state is JobState.SUSPENDED else JobState.RUNNING
        elif self.step_id == 0:
            state = job_state if job_state.is_final else JobState.COMPLETED
        else:
            state = self.state or JobState.COMPLETED
        return StepInfo(step_id=self.step_id, name=argv[0].rsplit("/", 1)[-1] or argv[0], state=state,
                        tasks=len(self.slots), nodes=self.nodes(node_names),
                        start_time=job_start if self.step_id == 0 else self.start_time, end_time=self.end_time,
                        exit_code=job_exit if self.step_id == 0 else self.exit_code, cpu_s=self.cpu_ns / 1e9,
                        max_rss=self.max_rss,
                        failed_tasks=[TaskFailure(rank=rank, node=self.node_of(rank, node_names), exit_code=code)
                                      for rank, code in sorted(self.failed_tasks.items())])


def _status(exit_code: int | None) -> int:
    return 0 if exit_code is None else 128 - exit_code if exit_code < 0 else exit_code


def task_slots(spec: JobSpec, processors: int, tasks: list[int] | None = None) -> list[int]:
    """Where tasks of the allocation of ``processors`` begin: the first of each one's processors (a task of
    ``-c N`` holds N from there, on one node); ``tasks``: some of the allocation's tasks, in order, else all."""
    every = range(0, processors, spec.cpus_per_task)
    return list(every) if tasks is None else [every[task] for task in tasks]


def first_step(spec: JobSpec, processors: int, barrier_port: int | None, rendezvous_port: int | None) -> Step:
    """Step 0: the job's own command, on every task of its allocation of ``processors``; a batch job's
    script (sbatch) on its first alone, the batch step, as salloc's holder of its allocation."""
    slots = task_slots(spec, processors, [0] if spec.script is not None or spec.allocation else None)
    return Step(0, slots, set(range(len(slots))), None, barrier_port, rendezvous_port)
