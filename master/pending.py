"""The jobs that wait: those their dependencies still hold back, and the policy's queue; and
whether the policy must decide again.

A pending job goes to the policy once it is not held (``gang hold``), its
``--begin`` time has come (BeginTime until then), the jobs it depends on allow
(master/dependencies.py), its user's limits admit it
(master/user_limits.py), and, in an array with a throttle (Slurm's
``--array=0-99%4``), once fewer than that many of its array are in the policy
or running: the others wait, JobArrayTaskLimit, and go in index order as
those leave. Every scheduling event (an arrival, a departure, a
node up or lost, the time the policy asked to be woken at) marks that the
policy must decide again, which the next settle does (master/decisions.py).
"""

import heapq
from collections.abc import Iterator

from gangsched.master.clock import Now
from gangsched.master.dependencies import Sibling, dependencies, named, singleton_blocker
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.user_limits import Admission
from gangsched.master.waiting import Wait, WaitKind
from gangsched.policy.live_scheduler import Changes, LiveScheduler
from gangsched.protocol.records import Hold
from gangsched.protocol.times import format_time


class PendingQueue:
    def __init__(self, table: JobTable, scheduler: LiveScheduler, admission: Admission) -> None:
        self._table = table
        self._admission = admission  # every partition's, shared
        self.scheduler = scheduler
        self.held: dict[int, Job] = {}  # pending, held back by their owner or root (gang hold)
        self.dependent: dict[int, Job] = {}  # pending, held back from the policy by the jobs they depend on
        self.not_begun: dict[int, Job] = {}  # pending, before their --begin time
        self._begins: list[tuple[float, int]] = []  # (begin time, job id) of those, soonest first
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
        begin = job.spec.begin_time
        if begin is not None and begin > now.wall:
            if self.not_begun.setdefault(job.job_id, job) is job:
                heapq.heappush(self._begins, (begin, job.job_id))
            job.waits(Wait(WaitKind.BEGIN_TIME, format_time(begin)))
            return None
        self.not_begun.pop(job.job_id, None)
        waiting, never, _ = dependencies(job.spec, self._table.state_of)
        self.dependent.pop(job.job_id, None)
        if never is not None:
            return never
        if not waiting and job.spec.singleton:
            blocker = singleton_blocker(job.job_id, self._siblings(job))
            waiting = [] if blocker is None else [blocker]
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
            or job_id in self._admission.waiting or job_id in self.not_begun

    def begun(self, wall: float) -> list[Job]:
        """The jobs whose --begin time has come by ``wall`` (for the caller to enqueue), in that order."""
        come = []
        while self._begins and self._begins[0][0] <= wall:
            _, job_id = heapq.heappop(self._begins)
            job = self.not_begun.get(job_id)
            if job is not None and job.spec.begin_time is not None and job.spec.begin_time <= wall:
                del self.not_begun[job_id]
                come.append(job)
        return come

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
        self.not_begun.pop(job.job_id, None)
        self.throttled.get(job.spec.array_job_id or 0, {}).pop(job.job_id, None)
        self.decide_again = True

    def dependents_of(self, ended: Job) -> list[Job]:
        """The jobs that wait for ``ended``: by its id, or as singletons of its user and name."""
        spec = ended.spec
        return [job for job in self.dependent.values() if ended.job_id in named(job.spec)
                or (job.spec.singleton and job.spec.user == spec.user and job.spec.name == spec.name)]

    def _siblings(self, job: Job) -> list[Sibling]:
        """Its user's other jobs of its name, as a singleton's wait reads them."""
        user, name = job.spec.user, job.spec.name
        return [Sibling(other.job_id, other.state, other.wait is None or not other.wait.holds_back,
                        other.spec.singleton, other.hold is not None)
                for other in self._table.jobs.values() if other.spec.user == user and other.spec.name == name]


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

    def dependents_of(self, ended: Job) -> list[Job]:
        """The jobs of every partition held back by ``ended``: a job may depend on one of another partition."""
        return [job for queue in self for job in queue.dependents_of(ended)]
