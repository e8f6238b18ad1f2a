"""What each user may have at once (docs/operations.md, "Limits"): Slurm's QOS limits per user,
``MaxSubmitJobs``, ``MaxJobs`` and ``MaxTRESPerUser`` (cpu, mem), for every partition or for one.

A submission that would take a user past ``max_submit_jobs`` pending and
running jobs is refused whole, as is a job that alone asks for more
processors or memory than the user may ever have. The running limits admit
a job to its partition's queue (master/pending.py) only while the user's
admitted jobs (in the policy's queue or running) stay within them; the
others wait, in job order, with Slurm's reason (QOSMaxJobsPerUserLimit,
QOSMaxCpuPerUserLimit, QOSMaxMemoryPerUser), and go in as admitted jobs leave.
A limit set anew lets in whoever it now admits.
"""

from dataclasses import dataclass

from gangsched.master.job_record import Job
from gangsched.master.waiting import Wait, WaitKind
from gangsched.protocol.records import JobSpec, UserLimits

EVERY_PARTITION = ""


@dataclass
class _Use:
    jobs: int = 0
    cpus: int = 0
    memory: int = 0


def job_memory(spec: JobSpec) -> int:
    """The most a job may commit, wherever it is placed (its nodes are not known before)."""
    return spec.memory_on(spec.nodes or spec.tasks)


class Admission:
    def __init__(self, limits: list[tuple[str, UserLimits]]) -> None:
        self.limits: dict[tuple[str, str], UserLimits] = {(user, each.partition or EVERY_PARTITION): each
                                                          for user, each in limits}
        self._use: dict[tuple[str, str], _Use] = {}
        self._counted: dict[int, Job] = {}
        self.waiting: dict[int, Job] = {}  # held back by a limit, in the order they came

    def set(self, user: str, limits: UserLimits) -> list[Job]:
        """A user's limits for every partition or one, set anew (no field given: none); the jobs they now let in."""
        key = (user, limits.partition or EVERY_PARTITION)
        if limits.model_dump(exclude={"partition"}, exclude_none=True):
            self.limits[key] = limits
        else:
            self.limits.pop(key, None)
        return self._release(user)

    def of(self, user: str) -> list[UserLimits]:
        return [limits for (owner, _), limits in sorted(self.limits.items()) if owner == user]

    def submit_refusal(self, spec: JobSpec, count: int, held: list[Job]) -> str | None:
        """Why ``count`` more jobs of ``spec`` may not be submitted, given the user's jobs ``held`` (pending
        or running), if they may not."""
        for key in self._keys(spec):
            limits = self.limits.get(key)
            if limits is None:
                continue
            where = "" if not key[1] else f" in partition {key[1]}"
            if limits.max_cpus is not None and spec.processors > limits.max_cpus:
                return f"needs {spec.processors} processors, user {spec.user}'s MaxCPUs{where} is {limits.max_cpus}"
            if limits.max_memory is not None and job_memory(spec) > limits.max_memory:
                return f"needs {job_memory(spec)} bytes of memory, user {spec.user}'s MaxMemory{where} is " \
                    f"{limits.max_memory}"
            if limits.max_submit_jobs is not None:
                there = sum(1 for job in held if not key[1] or job.spec.partition == key[1])
                if there + count > limits.max_submit_jobs:
                    return f"user {spec.user} has {there} jobs pending or running{where}: {count} more would pass " \
                        f"MaxSubmitJobs {limits.max_submit_jobs}"
        return None

    def admit(self, job: Job) -> bool:
        """Whether ``job`` may go to its queue now (counted if so; one counted already may); if not, it waits
        with the reason."""
        if job.job_id in self._counted:
            return True
        blocking = self._blocking(job)
        if blocking is not None:
            self.waiting[job.job_id] = job
            job.waits(Wait(blocking))
            return False
        self.count(job)
        return True

    def withdrawn(self, job: Job) -> None:
        """A pending job left its queue for good: it no longer waits for its user's limits."""
        self.waiting.pop(job.job_id, None)

    def count(self, job: Job) -> None:
        """The job holds its share of its user's limits (admitted, or restored running)."""
        self.waiting.pop(job.job_id, None)
        if job.job_id in self._counted:
            return
        self._counted[job.job_id] = job
        for key in self._keys(job.spec):
            use = self._use.setdefault(key, _Use())
            use.jobs, use.cpus = use.jobs + 1, use.cpus + job.spec.processors
            use.memory += job_memory(job.spec)

    def left(self, job: Job) -> list[Job]:
        """``job`` left its queue or ended: what it held is given back; the user's waiting jobs it lets in,
        counted, in order."""
        self.waiting.pop(job.job_id, None)
        counted = self._counted.pop(job.job_id, None)
        if counted is None:
            return []
        for key in self._keys(counted.spec):
            use = self._use[key]
            use.jobs, use.cpus, use.memory = use.jobs - 1, use.cpus - counted.spec.processors, \
                use.memory - job_memory(counted.spec)
        return self._release(counted.spec.user)

    def _release(self, user: str) -> list[Job]:
        """The user's waiting jobs the limits now admit, counted, in order: up to the first that still waits."""
        released = []
        for job in [job for job in self.waiting.values() if job.spec.user == user]:
            if self._blocking(job) is not None:
                break
            self.count(job)
            released.append(job)
        return released

    def _blocking(self, job: Job) -> WaitKind | None:
        spec = job.spec
        for key in self._keys(spec):
            limits = self.limits.get(key)
            if limits is None:
                continue
            use = self._use.get(key, _Use())
            if limits.max_jobs is not None and use.jobs + 1 > limits.max_jobs:
                return WaitKind.USER_JOBS
            if limits.max_cpus is not None and use.cpus + spec.processors > limits.max_cpus:
                return WaitKind.USER_CPUS
            if limits.max_memory is not None and use.memory + job_memory(spec) > limits.max_memory:
                return WaitKind.USER_MEMORY
        return None

    @staticmethod
    def _keys(spec: JobSpec) -> list[tuple[str, str]]:
        """The limits that bind a job: its user's in every partition, and in its own."""
        keys = [(spec.user, EVERY_PARTITION)]
        if spec.partition:
            keys.append((spec.user, spec.partition))
        return keys
