"""The jobs the master holds while they are pending or running, and its users' accounts.

Finished jobs are the store's; a job is looked up here first, then there. The
table answers the questions the other parts ask of the jobs (which run, which
were running before a restart and wait for their nodes) and turns a job into
what the policy sees of it.
"""

from gangsched.master.accounts import Account, Use
from gangsched.master.clock import Now
from gangsched.master.job_record import Job
from gangsched.master.placement import memory_request
from gangsched.master.settings import MasterSettings
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.policy.live_scheduler import PolicyJob
from gangsched.policy.predictor import UtilizationPredictor
from gangsched.protocol.records import JobState


class JobTable:
    def __init__(self, settings: MasterSettings, store: JobStore) -> None:
        self._settings = settings
        self._store = store
        self.jobs: dict[int, Job] = {}  # pending and running only
        # the jobs started since they last waited: a quantum's boundary asks which run, and going through
        # every job held was 0.5 ms with 10,000 pending, 5 with 100,000 (docs/limits.md)
        self._started: dict[int, Job] = {}
        self.unadopted: dict[int, Job] = {}  # running before a restart, until their nodes say hello
        self.accounts = {account.user: account for account in store.accounts()}
        self._charged: set[str] = set()  # users whose use accrued since their account was last written
        # until then, the nodes of a master restarted on an earlier run's store may still come back
        self.rejoin_until = 0.0

    def get(self, job_id: int) -> Job | None:
        """A pending or running job."""
        return self.jobs.get(job_id)

    def find(self, job_id: int) -> Job | None:
        """Any job, finished ones from the store."""
        return self.jobs.get(job_id) or self._store.get(job_id)

    def state_of(self, job_id: int) -> JobState | None:
        job = self.find(job_id)
        return None if job is None else job.state

    def add(self, job: Job) -> None:
        """A job submitted, taken back from the store, or its new record as it is requeued (in its old's place)."""
        self.jobs[job.job_id] = job

    def remove(self, job: Job) -> None:
        """A job closed: the store's from now on."""
        del self.jobs[job.job_id]

    def started(self, job: Job) -> None:
        """``job`` runs from now on (or ran before a restart, and is taken back)."""
        self._started[job.job_id] = job

    def awaits_nodes(self, job: Job) -> None:
        """A job that ran before a restart waits for its nodes' hello (``adopt``)."""
        self.unadopted[job.job_id] = job

    def adopted(self, job: Job) -> None:
        """A restored job no longer waits for its nodes (its ranks are all gone)."""
        self.unadopted.pop(job.job_id, None)

    def rejoin_for(self, until: float) -> None:
        """The nodes of a master restarted on an earlier run's store may come back until ``until``."""
        self.rejoin_until = until

    def account_written(self, account: Account) -> None:
        """A user's account as the store has it now (a job's use charged, the administrator's word)."""
        self.accounts[account.user] = account

    def running(self) -> list[Job]:
        """The running jobs, in job order. A job requeued (a new record) or ended (the table's no longer) is
        dropped from those started where it is found so."""
        for job_id, job in list(self._started.items()):
            if self.jobs.get(job_id) is not job or job.state is not JobState.RUNNING:
                del self._started[job_id]
        return sorted(self._started.values(), key=_job_id)

    def running_on(self, job_id: int, node: str) -> Job | None:
        job = self.jobs.get(job_id)
        return job if job is not None and job.state is JobState.RUNNING and node in job.node_names else None

    def adopt(self, up: set[str]) -> list[Job]:
        """The jobs restored after a restart whose nodes are all ``up`` again: no longer unadopted."""
        adopted = [job for job in self.unadopted.values() if set(job.node_names) <= up]
        for job in adopted:
            del self.unadopted[job.job_id]
        return adopted

    def policy_job(self, job: Job, now: Now) -> PolicyJob:
        spec = job.spec
        return PolicyJob(
            job_id=job.job_id,
            submit=now.monotonic_of(job.submit_time),
            procs=spec.processors,
            nodes=spec.nodes,
            tasks_per_node=spec.tasks_per_node,
            cpus_per_task=spec.cpus_per_task,
            estimate=self.time_limit(job),
            user_priority=spec.priority,
            political_priority=self.account(spec.user).priority_for_policy,
            migratable=spec.migratable and self._settings.checkpoint_dir is not None,
            memory=memory_request(spec),
            user=spec.user,
        )

    def predictor(self) -> UtilizationPredictor:
        return UtilizationPredictor(self._settings.sharp_change or None)

    def time_limit(self, job: Job) -> float:
        """The job's estimate, which is also its time limit."""
        return job.spec.estimate_s or self._settings.default_estimate_s

    def charge(self, user: str, use: Use) -> None:
        """What a job of ``user``'s used, as it accrued (a quantum it ran in, CPU time its nodes reported)."""
        self.account(user).charge(use)
        self._charged.add(user)

    def write_charges(self) -> None:
        """The accounts whose use accrued, written with the turn's other writes: whenever a job's record is
        committed, its user's use up to then is too, so no job is ever charged less than its record says it
        ran, even after a crash; a turn that writes nothing else (a quantum, a report) costs no commit. Use
        that accrued since the last write is lost with the master's memory, as a job's own time run is."""
        if not self._store.pending:
            return
        try:
            for user in sorted(self._charged):
                self._store.save_account(self.accounts[user])
        except StoreWriteError:
            # each stays charged, written with the next turn that writes; the store's failure is the commit's
            # to report (master/outgoing.py), once, not every turn's
            return
        self._charged.clear()

    def account(self, user: str) -> Account:
        account = self.accounts.get(user)
        if account is None:  # not made for each look-up: every node report asks for one
            account = self.accounts[user] = Account(user)
        return account


def _job_id(job: Job) -> int:
    return job.job_id
