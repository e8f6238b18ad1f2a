"""The master's answers to its clients."""

import bisect
import heapq
import logging
from collections import Counter
from collections.abc import Iterable
from itertools import islice

from gangsched.master.clock import Now
from gangsched.master.closing import StoreRetry
from gangsched.master.dependencies import dependencies
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.matrices import Matrices, Matrix
from gangsched.master.nodes import NodeRegistry
from gangsched.master.placement import Shape, committed_memory, describe_shape
from gangsched.master.reservation_book import ReservationBook
from gangsched.master.settings import MasterSettings
from gangsched.master.store import JobStore, StoreWriteError
from gangsched.master.user_limits import Admission
from gangsched.policy.memory import MemoryBook
from gangsched.policy.partitions import PartitionState
from gangsched.policy.topology import Topology
from gangsched.protocol.array_ranges import array_indices, array_size, compact, span
from gangsched.protocol.durations import format_duration
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.frames import JOBS_PER_REPLY
from gangsched.protocol.messages import (
    Cancel,
    Cancelled,
    ErrorReply,
    JobCount,
    JobCounts,
    JobList,
    JobQuery,
    MatrixQuery,
    MatrixView,
    NodeList,
    Submit,
    Submitted,
)
from gangsched.protocol.records import (
    UNSERVED_HINTS,
    ArraySpan,
    Hold,
    JobInfo,
    JobSpec,
    JobState,
    MpiKind,
    PartitionInfo,
    StepInfo,
)
from gangsched.protocol.sizes import readable

log = logging.getLogger("gangsched.master")

_FINISHED_SHOWN = 200
HIDDEN = "(hidden)"  # another user's command, as they are shown it


class ClientRequests:
    """What clients ask: submit, cancel, the queue, the nodes, the matrix."""

    def __init__(self, settings: MasterSettings, store: JobStore, nodes: NodeRegistry, table: JobTable,
                 endings: Endings, matrices: Matrices, admission: Admission,
                 reservations: ReservationBook, retry: StoreRetry) -> None:
        self._mpi_default = settings.mpi_default
        self._cluster_name = settings.cluster_name
        self._private_details = settings.private_job_details
        self._max_array_size, self._max_job_count = settings.max_array_size, settings.max_job_count
        self._store = store
        self._nodes = nodes
        self._table = table
        self._endings = endings
        self._matrices = matrices
        self._admission = admission
        self._reservations = reservations
        self._retry = retry

    def submit(self, message: Submit, now: Now) -> Submitted | ErrorReply:
        spec = message.spec
        count = 1 if message.array is None else array_size(message.array)
        if message.token is not None:
            earlier = self._store.job_of_token(spec.user, message.token)
            if earlier is not None:  # an array's jobs have consecutive ids
                return Submitted(job_id=earlier, count=count)
        refusal = self._limit_refusal(message, count)
        if refusal is not None:
            return refusal
        chosen = self.partition_for(spec, now)
        if isinstance(chosen, ErrorReply):
            return chosen
        matrix, spec = chosen
        reserved = self._reservations.submit_refusal(spec)
        if reserved is not None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"{reserved}: nothing submitted")
        if self._admission.limits:
            held = [job for job in self._table.jobs.values() if job.spec.user == spec.user]
            limited = self._admission.submit_refusal(spec, count, held)
            if limited is not None:
                return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"{limited}: nothing submitted")
        first = self._store.next_job_id()
        if message.array is None:
            specs = [spec]
        else:
            count, lowest, highest, step = span(message.array)
            whole = ArraySpan(count=count, first=lowest, last=highest, step=step)
            specs = [spec.model_copy(update={"array_job_id": first, "array_index": index,
                                             "array_limit": message.array_limit, "array_span": whole})
                     for index in array_indices(message.array)]
        hold = Hold.USER if message.hold else None
        jobs = [Job(job_id=first + offset, spec=each, state=JobState.PENDING, submit_time=now.wall,
                    predictor=self._table.predictor(), hold=hold) for offset, each in enumerate(specs)]
        try:
            self._store.submitted(jobs, message.token)
        except StoreWriteError as error:  # refused whole: nothing was kept, so nothing waits to be written
            self._retry.refused()
            log.error("the job store cannot write a submission by %s (%s): refused", spec.user, error)
            return ErrorReply(code=ErrorCode.INTERNAL, reason=f"the job store cannot write ({error}): nothing was "
                              "submitted; try again later")
        for job in jobs:
            self._table.add(job)
            self._endings.enqueue(job, now)
        made = f"job {first}" if count == 1 else f"jobs {first}-{first + count - 1}"  # an array's: one line
        log.info("%s submitted by %s to %s: %s, %d tasks", made, spec.user, matrix.name, spec.name, spec.tasks)
        return Submitted(job_id=first, count=count)

    def partition_for(self, spec: JobSpec, now: Now) -> tuple[Matrix, JobSpec] | ErrorReply:
        """The partition the job goes to: the one it names, or of those it names the first that takes it
        (Slurm's -p a,b; chosen here, at submission), else the default, and the job as it names its values
        there from now on (``_with_defaults``); or why none takes it."""
        names = spec.partition.split(",") if spec.partition else [self._matrices.default.name]
        unknown = [name for name in names if self._matrices.named(name) is None]
        if unknown:
            known = ", ".join(matrix.name for matrix in self._matrices)
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"no partition {unknown[0]!r}: the partitions are "
                              f"{known}")
        refusals = []
        for name in names:
            matrix = self._matrices.named(name)
            assert matrix is not None
            there = self._with_defaults(spec, matrix)
            refusal = self._partition_refusal(spec, matrix) or self._refusal(there, matrix, now)
            if refusal is None:
                return matrix, there
            refusals.append(refusal)
        return refusals[0] if len(refusals) == 1 else ErrorReply(
            code=refusals[0].code, reason="; ".join(f"{name}: {refusal.reason}"
                                                    for name, refusal in zip(names, refusals, strict=True)))

    def _partition_refusal(self, spec: JobSpec, matrix: Matrix) -> ErrorReply | None:
        """Whether the partition takes the job: its state, its users, its longest time limit."""
        partition = matrix.partition
        if partition.state is not PartitionState.UP:
            return ErrorReply(code=ErrorCode.INVALID_SPEC,
                              reason=f"partition {partition.name} is {partition.state}: it takes no job")
        if partition.allow_users is not None and spec.user not in partition.allow_users and spec.user != "root":
            return ErrorReply(code=ErrorCode.PERMISSION_DENIED,
                              reason=f"user {spec.user} may not use partition {partition.name}")
        limit = partition.max_time_s
        if limit is not None and spec.estimate_s is not None and spec.estimate_s > limit:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"a time limit of {format_duration(spec.estimate_s)} "
                              f"is past partition {partition.name}'s MaxTime of {format_duration(limit)}")
        return None

    def _with_defaults(self, spec: JobSpec, matrix: Matrix) -> JobSpec:
        """What the job names from now on: its partition, and where it gave none, its process-manager
        interface (Slurm's MpiDefault), its memory (DefMemPerCPU) and its time limit (the partition's default,
        at most its MaxTime)."""
        settings = matrix.settings
        update: dict[str, object] = {"partition": matrix.name}
        if spec.mpi is None:
            update["mpi"] = self._mpi_default
        if spec.mem_per_node is None and spec.mem_per_cpu is None:
            update["mem_per_cpu"] = settings.default_mem_per_cpu
        if spec.estimate_s is None:
            limit = matrix.partition.max_time_s
            update["estimate_s"] = settings.default_estimate_s if limit is None else min(limit,
                                                                                        settings.default_estimate_s)
        return spec.model_copy(update=update)

    def _limit_refusal(self, message: Submit, count: int) -> ErrorReply | None:
        """A submission past the master's limits (Slurm's MaxArraySize and MaxJobCount): refused whole."""
        highest = max((last for _, last, _ in message.array or ()), default=None)
        if highest is not None and highest >= self._max_array_size:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"array index {highest} is past the master's "
                              f"--max-array-size {self._max_array_size} (indices 0-{self._max_array_size - 1})")
        held = len(self._table.jobs)
        if held + count > self._max_job_count:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"{count} more jobs would pass the master's "
                              f"--max-job-count {self._max_job_count} ({held} pending or running): nothing submitted")
        return None

    def _refusal(self, spec: JobSpec, matrix: Matrix, now: Now) -> ErrorReply | None:
        """Why a job can never run in the partition, if it cannot: wider than its nodes, or depending on
        what cannot be."""
        if spec.array_job_id is not None or spec.array_index is not None or spec.array_span is not None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason="a job's array fields are the master's to set")
        # while the nodes of a restarted master come back, a job waits for them instead
        if now.monotonic < self._table.rejoin_until:
            return self.dependency_refusal(spec)
        within = matrix.partition.holds
        processors, memory = self._nodes.processors(within), self._nodes.memories(within)
        cluster = Topology.of(processors, memory)
        shape = Shape.of(spec)
        every = (1 << cluster.width) - 1
        where = "the cluster" if matrix.partition.nodes is None else f"partition {matrix.name}"
        if not cluster.fits(every, shape):
            reason = f"needs {describe_shape(spec, memory=False)}, " \
                f"{where} has {cluster.width} processors on {len(cluster.node_columns)} nodes"
            return ErrorReply(code=ErrorCode.NEVER_FITS, reason=reason)
        if not cluster.fits(MemoryBook(cluster).usable(shape, every), shape):
            reason = f"needs {describe_shape(spec)}, {where}'s largest node has {readable(max(memory))} of memory"
            return ErrorReply(code=ErrorCode.NEVER_FITS, reason=reason)
        if spec.mpi not in (None, MpiKind.NONE) and not self._nodes.serving(spec.mpi):
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"no node serves --mpi {spec.mpi}: "
                              f"{UNSERVED_HINTS.get(spec.mpi, 'see gang submit --mpi list')}")
        return self.dependency_refusal(spec)

    def dependency_refusal(self, spec: JobSpec) -> ErrorReply | None:
        found = dependencies(spec, self._table.state_of)
        if found.unknown is not None:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no job {found.unknown} to depend on")
        if found.never is not None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC,
                              reason=f"the dependency can never be satisfied: {found.never}")
        return None

    def cancel(self, message: Cancel, now: Now) -> Cancelled | ErrorReply:
        job = self._table.get(message.job_id)
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
        running = job.state is not JobState.PENDING
        if running and message.command_exit is not None and job.ending is None:
            job.command_ended(message.command_exit)
            code = message.command_exit
            self._endings.decide_end(job, JobState.COMPLETED if code == 0 else JobState.FAILED,
                                     "" if code == 0 else f"salloc's command exited with status {code}", now)
        elif running:
            self._endings.decide_end(job, JobState.CANCELLED, reason, now)
        else:
            self._endings.withdraw(job, reason, now)
        return Cancelled(job_id=job.job_id, state=job.ending or job.state, killed=running)

    def query_jobs(self, message: JobQuery, now: Now) -> JobList:
        if message.job_ids is not None:
            found = (self._table.find(job_id) for job_id in message.job_ids)
            asked = sorted((job for job in found if job is not None and job.job_id > message.after_id),
                           key=lambda job: job.job_id)[:JOBS_PER_REPLY + 1]
            return JobList(jobs=self._infos(asked[:JOBS_PER_REPLY], now, message),
                           more=len(asked) > JOBS_PER_REPLY)
        finished: list[Job] = []
        if message.ended_after is not None:
            finished = self._store.ended_since(message.ended_after, message.after_id, JOBS_PER_REPLY + 1)
        elif message.include_finished:
            finished = self._store.finished(_FINISHED_SHOWN)
        # the table holds its jobs in id order: a page starts where the last one ended, and costs what it
        # shows, not the queue's depth (a listing of 100,000 jobs is a thousand pages)
        active = self._table.jobs
        ids = list(active)
        start = bisect.bisect_right(ids, message.after_id)
        arrays = _pending_arrays(active.values()) if message.arrays else {}
        chosen = (job for job in heapq.merge((job for job in finished if job.job_id > message.after_id),
                                             (active[job_id] for job_id in islice(ids, start, None)),
                                             key=lambda job: job.job_id)
                  if _wanted(job, message))
        page: list[tuple[Job, str | None]] = []  # each job, and the pending jobs of its array it stands for
        more = False
        for job in chosen:
            if len(page) == JOBS_PER_REPLY:
                more = True
                break
            pending = arrays.get(job.spec.array_job_id or 0) if job.state is JobState.PENDING else None
            if pending is None:
                page.append((job, None))
            elif pending[0] == job.spec.array_index:  # the array's first waiting job stands for them all
                page.append((job, compact(pending)))
        infos = self._infos([job for job, _ in page], now, message)
        return JobList(jobs=[info if array is None else info.model_copy(update={"array_pending": array})
                             for info, (_, array) in zip(infos, page, strict=True)], more=more)

    def count_jobs(self, now: Now) -> JobCounts:
        """The jobs held, by state, partition and why the pending ones wait: every waiting job explained."""
        for matrix in self._matrices:
            matrix.decisions.explain_waiting(now)
        counts = Counter((job.shown_state(), job.spec.partition or "",
                          job.shown_reason() if job.state is JobState.PENDING else "")
                         for job in self._table.jobs.values())
        return JobCounts(counts=[JobCount(state=state, partition=partition, reason=reason, count=count)
                                 for (state, partition, reason), count in sorted(counts.items())])

    def _infos(self, jobs: list[Job], now: Now, query: JobQuery) -> list[JobInfo]:
        """The jobs as a reply to ``query``'s viewer shows them, why each waiting one waits explained as far as
        the last of them: another user's without what only its owner and root see (``private_job_details``);
        a brief query's without what listings never print."""
        if jobs:
            for matrix in self._matrices:
                matrix.decisions.explain_waiting(now, through=jobs[-1].job_id)
        infos = [job.info() for job in jobs]
        viewer = query.viewer
        hidden = viewer is not None and viewer != "root" and self._private_details
        if not hidden and not query.brief:
            return infos
        return [info.model_copy(update={"spec": private(info.spec), "steps": private_steps(info.steps)})
                if hidden and info.spec.user != viewer else info.model_copy(update={"spec": brief(info.spec)})
                if query.brief else info for info in infos]

    def query_nodes(self, now: Now) -> NodeList:
        jobs_by_node: dict[str, list[int]] = {}
        for job in self._table.jobs.values():
            for node in job.running_nodes():
                jobs_by_node.setdefault(node, []).append(job.job_id)
        in_turn: dict[str, int] = {}
        for matrix in self._matrices:
            for node, used in matrix.rotation.processors_in_turn().items():
                in_turn[node] = in_turn.get(node, 0) + used
        nodes = self._nodes.info(jobs_by_node, in_turn, committed_memory(self._table.running()),
                                 lambda node: [matrix.name for matrix in self._matrices.holding(node)], now.monotonic)
        booked: dict[str, list[str]] = {}
        for name, reservation in sorted(self._reservations.booked.items()):
            for node in reservation.nodes:
                booked.setdefault(node, []).append(name)
        if booked:
            nodes = [node.model_copy(update={"reservations": booked.get(node.name, [])}) for node in nodes]
        return NodeList(nodes=nodes, mpi_default=self._mpi_default, cluster=self._cluster_name,
                        partitions=[self._partition_info(matrix, [node.name for node in nodes])
                                    for matrix in self._matrices])

    def _partition_info(self, matrix: Matrix, known: list[str]) -> PartitionInfo:
        partition, settings = matrix.partition, matrix.settings
        return PartitionInfo(
            name=partition.name, default=matrix is self._matrices.default, state=partition.state,
            priority_tier=partition.priority_tier, preempt_mode=partition.preempt_mode,
            max_time_s=partition.max_time_s, nodes=[name for name in known if partition.holds(name)],
            quantum_ms=settings.quantum_ms, policy=matrix.queue.scheduler.name, mpl=settings.mpl,
            allow_users=None if partition.allow_users is None else sorted(partition.allow_users))

    def query_matrix(self, message: MatrixQuery) -> MatrixView | ErrorReply:
        matrix = self._matrices.default if message.partition is None else self._matrices.named(message.partition)
        if matrix is None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"no partition {message.partition!r}: the "
                              f"partitions are {', '.join(each.name for each in self._matrices)}")
        return matrix.rotation.matrix_view()

def _wanted(job: Job, query: JobQuery) -> bool:
    return ((query.states is None or job.state in query.states) and (query.user is None or job.spec.user == query.user)
            and (query.partition is None or job.spec.partition == query.partition))


def private(spec: JobSpec) -> JobSpec:
    """``spec`` as another user sees it, as Slurm's PrivateData=jobs keeps it: its owner, name, shape and
    limits, not its command, batch script, environment or working folder (a secret in an exported variable,
    a path)."""
    return spec.model_copy(update={"argv": [HIDDEN], "env": {}, "cwd": None, "script": None, "streams": None})


def private_steps(steps: list[StepInfo]) -> list[StepInfo]:
    """Another user's steps, without the names of their commands (``private``)."""
    return [step.model_copy(update={"name": HIDDEN}) for step in steps]


def brief(spec: JobSpec) -> JobSpec:
    """``spec`` as a listing shows it (``JobQuery.brief``): without its environment and batch script, which
    listings never print and which are the most of a job's bytes."""
    return spec.model_copy(update={"env": {}, "script": None})


def _pending_arrays(jobs: Iterable[Job]) -> dict[int, list[int]]:
    """Each array's pending jobs' indices, increasing (jobs come in id order, which is index order)."""
    found: dict[int, list[int]] = {}
    for job in jobs:
        array = job.spec.array_job_id
        if array is not None and job.state is JobState.PENDING:
            found.setdefault(array, []).append(job.spec.array_index or 0)
    return found
