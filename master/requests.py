"""The master's answers to its clients."""

import logging

from gangsched.master.dependencies import dependencies
from gangsched.master.jobs import Job
from gangsched.master.lifecycle import JobLifecycle
from gangsched.master.placement import Shape, describe_shape
from gangsched.master.stats import resident_bytes
from gangsched.policy.topology import Topology
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.frames import JOBS_PER_REPLY
from gangsched.protocol.messages import (
    Cancel,
    Cancelled,
    ErrorReply,
    JobList,
    JobQuery,
    MasterStats,
    MatrixView,
    NodeList,
    SetUser,
    Submit,
    Submitted,
    SwitchStats,
    UserList,
)
from gangsched.protocol.records import JobSpec, JobState

log = logging.getLogger("gangsched.master")

_FINISHED_SHOWN = 200


class ClientRequests(JobLifecycle):
    """What clients ask: submit, cancel, the queue, the nodes, the matrix, users."""

    def submit(self, message: Submit) -> Submitted | ErrorReply:
        spec = message.spec
        count = len(message.array or [None])
        if message.token is not None:
            earlier = self._store.job_of_token(spec.user, message.token)
            if earlier is not None:  # an array's jobs have consecutive ids
                return Submitted(job_id=earlier, job_ids=list(range(earlier, earlier + count)))
        refusal = self._refusal(spec)
        if refusal is not None:
            return refusal
        first = self._store.next_job_id()
        specs = [spec] if message.array is None else [
            spec.model_copy(update={"array_job_id": first, "array_index": index}) for index in message.array
        ]
        now = self._clock.time()
        jobs = [Job(job_id=first + offset, spec=each, state=JobState.PENDING, submit_time=now,
                    predictor=self._predictor()) for offset, each in enumerate(specs)]
        self._store.submitted(jobs, message.token)
        for job in jobs:
            self._jobs[job.job_id] = job
            log.info("job %d submitted by %s: %s, %d tasks", job.job_id, spec.user, spec.name, spec.tasks)
            self._enqueue(job)
        self._settle()
        return Submitted(job_id=first, job_ids=[job.job_id for job in jobs])

    def _refusal(self, spec: JobSpec) -> ErrorReply | None:
        """Why a job can never run, if it cannot: wider than the cluster, or depending on what cannot be."""
        if spec.array_job_id is not None or spec.array_index is not None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason="a job's array fields are the master's to set")
        cluster = Topology.of(self._nodes.processors())
        # while the nodes of a restarted master come back, a job waits for them instead
        if self._clock.monotonic() >= self._rejoin_until and \
                not cluster.fits((1 << cluster.width) - 1, Shape.of(spec)):
            reason = f"needs {describe_shape(spec)}, " \
                f"the cluster has {cluster.width} processors on {len(cluster.node_columns)} nodes"
            return ErrorReply(code=ErrorCode.NEVER_FITS, reason=reason)
        found = dependencies(spec, self._state_of)
        if found.unknown is not None:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no job {found.unknown} to depend on")
        if found.never is not None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC,
                              reason=f"the dependency can never be satisfied: {found.never}")
        return None

    def cancel(self, message: Cancel) -> Cancelled | ErrorReply:
        job = self._jobs.get(message.job_id)
        if job is None:
            stored = self._store.get(message.job_id)
            if stored is None:
                return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no job {message.job_id}")
            return ErrorReply(
                code=ErrorCode.JOB_FINISHED, reason=f"job {message.job_id} is already {stored.state}"
            )
        if message.user not in (job.spec.user, "root"):
            return ErrorReply(
                code=ErrorCode.PERMISSION_DENIED,
                reason=f"job {job.job_id} belongs to {job.spec.user}, not {message.user}",
            )
        reason = f"cancelled by {message.user}"
        if job.state is JobState.PENDING:
            self._scheduler.withdraw(job.job_id, self._clock.monotonic())
            self._dependent.pop(job.job_id, None)
            job.reason = reason
            self._close(job, JobState.CANCELLED)
            self._dirty = True
        else:
            self._decide_end(job, JobState.CANCELLED, reason)
        self._settle()
        return Cancelled(job_id=job.job_id, state=job.ending or job.state)

    def query_jobs(self, message: JobQuery) -> JobList:
        if message.job_ids is not None:
            found = (self._jobs.get(job_id) or self._store.get(job_id) for job_id in message.job_ids)
            jobs = [job for job in found if job is not None]
        else:
            jobs = list(self._jobs.values())
            if message.ended_after is not None:
                jobs = self._store.ended_since(message.ended_after, message.after_id, JOBS_PER_REPLY + 1) + jobs
            elif message.include_finished:
                jobs = self._store.finished(_FINISHED_SHOWN) + jobs
        page = sorted((job for job in jobs if job.job_id > message.after_id), key=lambda job: job.job_id)
        return JobList(jobs=[job.info() for job in page[:JOBS_PER_REPLY]], more=len(page) > JOBS_PER_REPLY)

    def query_nodes(self) -> NodeList:
        jobs_by_node: dict[str, list[int]] = {}
        for job in self._jobs.values():
            for node in sorted({job.node_names[rank] for rank in job.live_ranks}):
                jobs_by_node.setdefault(node, []).append(job.job_id)
        used: dict[str, int] = {}
        for row in self._selection.rows[:1]:  # the slot whose turn it is
            for processor in self._scheduler.rows[row] if row < len(self._scheduler.rows) else ():
                used[processor.node] = used.get(processor.node, 0) + 1
        return NodeList(nodes=self._nodes.info(jobs_by_node, used, self._clock.monotonic()))

    def query_matrix(self) -> MatrixView:
        columns = self._scheduler.columns
        name = self._scheduler.name
        return MatrixView(
            quantum=self._quantum,
            quantum_ms=self.settings.quantum_ms,
            policy=name if self._planner.name == "strict" else f"{name}/{self._planner.name}",
            nodes=[processor.node for processor in columns],
            processors=[processor.number for processor in columns],
            rows=[[row.get(processor) for processor in columns] for row in self._scheduler.rows],
            running=list(self._selection.rows),
            alternates=list(self._selection.alternates),
        )

    def set_user(self, message: SetUser) -> UserList | ErrorReply:
        """The administrator's word on a user: it counts for the jobs they submit from now on."""
        if message.admin != "root":
            return ErrorReply(code=ErrorCode.PERMISSION_DENIED,
                              reason=f"only root sets users' priorities and quotas, not {message.admin}")
        account = self._account(message.user)
        if message.political_priority is not None:
            account.political_priority = message.political_priority
        if message.quota_node_s is not None or message.clear_quota:
            account.quota_node_s = message.quota_node_s
        self._store.save_account(account)
        log.info("user %s: political priority %g, quota %s node-s", account.user, account.political_priority,
                 account.quota_node_s)
        return self.query_users()

    def query_users(self) -> UserList:
        return UserList(users=[self._accounts[user].info() for user in sorted(self._accounts)])

    def switch_stats(self, last: int) -> SwitchStats:
        return self._switch_log.stats(last, self._quantum, self._clock.process_time_ns())

    def stats(self) -> MasterStats:
        switches = self._switch_log
        return MasterStats(
            start_time=self._start_time,
            quanta=self._quantum,
            busy_quanta=switches.busy_quanta,
            paired_quanta=switches.paired_quanta,
            scheduling_events=self._decision_time.count,
            switch_latency=switches.latency.histogram(),
            scheduling=self._decision_time.histogram(),
            quantum_decision=self.tick_time.histogram(),
            report_drain=self.report_drain_time.histogram(),
            store_write=self._store.write_time.histogram(),
            migrations=self._migration_costs.count,
            migration_cost=self._migration_costs.histogram(),
            cpu_s=self._clock.process_time_ns() / 1e9,
            resident_bytes=resident_bytes(),
        )
