"""The jobs that wait: those their dependencies still hold back, and the policy's queue; and
whether the policy must decide again.

A pending job goes to the policy once it is not held (``gang hold``), the
jobs it depends on allow (master/dependencies.py), its user's limits admit it
(master/user_limits.py), and, in an array with a throttle (Slurm's
``--array=0-99%4``), once fewer than that many of its array are in the policy
or running: the others wait, JobArrayTaskLimit, and go in index order as
those leave. Every scheduling event (an arrival, a departure, a
node up or lost, the time the policy asked to be woken at) marks that the
policy must decide again, which the next settle does (master/decisions.py).
"""

from collections.abc import Iterator

from gangsched.master.clock import Now
from gangsched.master.dependencies import dependencies, named
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.user_limits import Admission
from gangsched.master.waiting import Wait, WaitKind
from gangsched.policy.live_scheduler import Changes, LiveScheduler
from gangsched.protocol.records import Hold


class PendingQueue:
    def __init__(self, table: JobTable, scheduler: LiveScheduler, admission: Admission) -> None:
        self._table = table
        self._admission = admission  # every partition's, shared
        self.scheduler = scheduler
        self.held: dict[int, Job] = {}  # pending, held back by their owner or root (gang hold)
        self.dependent: dict[int, Job] = {}  # pending, held back from the policy by the jobs they depend on
        self.throttled: dict[int, dict[int, Job]] = {}  # array job id -> its jobs its throttle holds back
        self._admitted: dict[int, set[int]] = {}  # array job id -> those of a throttled array in the policy or running
        self.decide_again = False  # a scheduling event happened: the policy must decide again
        self.wake_at: float | None = None  # monotonic seconds the policy asked to decide again at

    def event(self) -> None:
        """A scheduling event happened: the policy decides again at the next settle."""
        self.decide_again = True

    def decide(self, now: float) -> Changes:
        """The policy decides on what the events since it last did changed; when it asked to be woken."""
        self.decide_again = False
        changes = self.scheduler.schedule(now)
        self.wake_at = changes.wake_at
        return changes

    def enqueue(self, job: Job, now: Now) -> str | None:
        """The job goes to the policy once it is released and its dependencies allow; why they never will,
        if so (the caller cancels it)."""
        if job.hold is not None:
            self.held[job.job_id] = job
            job.waits(Wait(WaitKind.HELD_USER if job.hold is Hold.USER else WaitKind.HELD_ADMIN))
            return None
        self.held.pop(job.job_id, None)
        waiting, never, _ = dependencies(job.spec, self._table.state_of)
        self.dependent.pop(job.job_id, None)
        if never is not None:
            return never
        if waiting:
            self.dependent[job.job_id] = job
            job.waits(Wait(WaitKind.DEPENDENCY, ",".join(map(str, waiting))))
        elif not self._admission.admit(job):
            pass  # it waits for its user's jobs to end, with the limit's reason
        elif not self._admit(job):
            self.throttled.setdefault(job.spec.array_job_id or 0, {})[job.job_id] = job
            job.waits(Wait(WaitKind.ARRAY_LIMIT))
        else:
            job.queued()
            self.scheduler.submit(self._table.policy_job(job, now), now.monotonic, job.spec.reservation)
            self.decide_again = True
        return None

    def holds_back(self, job: Job) -> bool:
        """Whether the job waits out of the policy: held, for its dependencies, or its array's throttle."""
        job_id, throttled = job.job_id, self.throttled.get(job.spec.array_job_id or 0, ())
        return job_id in self.held or job_id in self.dependent or job_id in throttled \
            or job_id in self._admission.waiting

    def running(self, job: Job) -> None:
        """A job restored running after a restart counts against its array's throttle and its user's limits."""
        self._admit(job, always=True)
        self._admission.count(job)

    def left(self, job: Job) -> list[Job]:
        """``job`` left for good (ended, cancelled or held while it waited): the jobs its user's limits and
        its array's throttle now let go to the policy (for the caller to enqueue), in order."""
        return [*self._admission.left(job), *self._throttle_left(job)]

    def _throttle_left(self, job: Job) -> list[Job]:
        array = job.spec.array_job_id
        admitted = None if array is None else self._admitted.get(array)
        if array is None or admitted is None or job.job_id not in admitted:
            return []
        admitted.discard(job.job_id)
        held = self.throttled.get(array, {})
        limit = job.spec.array_limit or 0
        released = [held.pop(job_id) for job_id in sorted(held)[:max(0, limit - len(admitted))]]
        if not held:
            self.throttled.pop(array, None)
        if not admitted and not held:
            del self._admitted[array]
        return released

    def _admit(self, job: Job, always: bool = False) -> bool:
        """Whether its array's throttle lets ``job`` in (counted if so); a job of no throttled array is."""
        array, limit = job.spec.array_job_id, job.spec.array_limit
        if array is None or limit is None:
            return True
        admitted = self._admitted.setdefault(array, set())
        if len(admitted) >= limit and not always and job.job_id not in admitted:
            return False
        admitted.add(job.job_id)
        return True

    def left_the_policy(self, job: Job, now: Now) -> None:
        """A job the policy placed leaves it (it ended, its end was decided, or its start was undone)."""
        self.scheduler.finish(job.job_id, now.monotonic)
        self.decide_again = True

    def resubmit(self, job: Job, now: Now) -> None:
        """A job the policy had placed goes back to its queue as it is (requeued, or its start postponed)."""
        self.scheduler.submit(self._table.policy_job(job, now), now.monotonic, job.spec.reservation)
        self.decide_again = True

    def withdraw(self, job: Job, now: Now) -> None:
        """A pending job leaves the queue for good."""
        self.scheduler.withdraw(job.job_id, now.monotonic)
        self.held.pop(job.job_id, None)
        self._admission.withdrawn(job)
        self.dependent.pop(job.job_id, None)
        self.throttled.get(job.spec.array_job_id or 0, {}).pop(job.job_id, None)
        self.decide_again = True

    def dependents_of(self, job_id: int) -> list[Job]:
        return [job for job in self.dependent.values() if job_id in named(job.spec)]


class Queues:
    """Each partition's queue, by the partition's name: a job's is its partition's (``spec.partition``,
    which the master sets at submission and as it restores a job); that of a job whose partition the
    configuration no longer has (cancelled as the master restarts: master/core.py) is the first's."""

    def __init__(self) -> None:
        self._queues: dict[str, PendingQueue] = {}

    def add(self, partition: str, queue: PendingQueue) -> None:
        self._queues[partition] = queue

    def keep(self, partitions: list[str]) -> None:
        """Only these partitions' queues, in this order, after a reconfiguration."""
        self._queues = {name: self._queues[name] for name in partitions}

    def of(self, job: Job) -> PendingQueue:
        found = self._queues.get(job.spec.partition or "")
        return next(iter(self._queues.values())) if found is None else found

    def __iter__(self) -> Iterator[PendingQueue]:
        return iter(self._queues.values())

    def dependents_of(self, job_id: int) -> list[Job]:
        """The jobs of every partition held back by ``job_id``: a job may depend on one of another partition."""
        return [job for queue in self for job in queue.dependents_of(job_id)]
