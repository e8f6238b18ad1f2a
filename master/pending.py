"""The jobs that wait: those their dependencies still hold back, and the policy's queue; and
whether the policy must decide again.

A pending job goes to the policy once the jobs it depends on allow
(master/dependencies.py). Every scheduling event (an arrival, a departure, a
node up or lost, the time the policy asked to be woken at) marks that the
policy must decide again, which the next settle does (master/decisions.py).
"""

from gangsched.master.clock import Now
from gangsched.master.dependencies import dependencies, named
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.scheduling import LiveScheduler
from gangsched.master.waiting import Wait, WaitKind


class PendingQueue:
    def __init__(self, table: JobTable, scheduler: LiveScheduler) -> None:
        self._table = table
        self.scheduler = scheduler
        self.dependent: dict[int, Job] = {}  # pending, held back from the policy by the jobs they depend on
        self.decide_again = False  # a scheduling event happened: the policy must decide again
        self.wake_at: float | None = None  # monotonic seconds the policy asked to decide again at

    def event(self) -> None:
        """A scheduling event happened: the policy decides again at the next settle."""
        self.decide_again = True

    def enqueue(self, job: Job, now: Now) -> str | None:
        """The job goes to the policy once its dependencies allow; why they never will, if so (the
        caller cancels it)."""
        waiting, never, _ = dependencies(job.spec, self._table.state_of)
        self.dependent.pop(job.job_id, None)
        if never is not None:
            return never
        if waiting:
            self.dependent[job.job_id] = job
            job.wait = Wait(WaitKind.DEPENDENCY, ",".join(map(str, waiting)))
        else:
            job.reason, job.wait = "", None
            self.scheduler.submit(self._table.policy_job(job, now), now.monotonic)
            self.decide_again = True
        return None

    def resubmit(self, job: Job, now: Now) -> None:
        """A job the policy had placed goes back to its queue as it is (requeued, or its start postponed)."""
        self.scheduler.submit(self._table.policy_job(job, now), now.monotonic)
        self.decide_again = True

    def withdraw(self, job: Job, now: Now) -> None:
        """A pending job leaves the queue for good."""
        self.scheduler.withdraw(job.job_id, now.monotonic)
        self.dependent.pop(job.job_id, None)
        self.decide_again = True

    def dependents_of(self, job_id: int) -> list[Job]:
        return [job for job in self.dependent.values() if job_id in named(job.spec)]
