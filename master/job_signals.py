"""A user's signal to a running job's tasks (``SignalJob``, scancel --signal): whose it is to send, which steps
it reaches, and the nodes it goes to. As Slurm's scancel: by default every step's tasks but a batch job's batch
step (a shell that waits for its command before it handles a signal); ``batch``: the batch step's shell
alone; ``full``: every step, the batch step's processes too. sbatch's ``--signal`` the same way, once, when a
job's time limit is that near (``before_limit``)."""

import logging
from collections import deque

from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import ErrorReply, Message, SignalJob, Signalled, SignalTask
from gangsched.protocol.records import JobState

log = logging.getLogger("gangsched.master")


class JobSignals:
    def __init__(self, table: JobTable, outbox: deque[tuple[str, Message]]) -> None:
        self._table = table
        self._outbox = outbox

    def send(self, message: SignalJob) -> Signalled | ErrorReply:
        job = self._table.get(message.job_id)
        if job is None:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no pending or running job {message.job_id}")
        if message.user not in ("root", job.spec.user):
            return ErrorReply(code=ErrorCode.PERMISSION_DENIED,
                              reason=f"job {job.job_id} belongs to {job.spec.user}, not {message.user}")
        if job.state is not JobState.RUNNING or job.ending is not None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC,
                              reason=f"job {job.job_id} is {job.shown_state()}: only a running job takes a signal")
        if message.batch and job.spec.script is None:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"job {job.job_id} is not a batch job: it has no "
                              "batch step to signal")
        return Signalled(job_id=job.job_id, nodes=self._deliver(job, message.signal, message.batch, message.full,
                                                                message.step))

    def before_limit(self, job: Job) -> None:
        """Its ``--signal`` is due: its time limit is that near (master/decisions.py)."""
        warning = job.spec.signal
        if warning is not None:
            log.info("job %d: signal %d, %d s before its time limit", job.job_id, warning.number, warning.seconds)
            self._deliver(job, warning.number, warning.batch and job.spec.script is not None, full=False)

    def _deliver(self, job: Job, number: int, batch: bool, full: bool, only: int | None = None) -> list[str]:
        """The signal to the nodes of the steps it reaches (``only``: that step alone): the nodes."""
        live = [step for step in job.steps.values() if step.live_ranks]
        if only is not None:
            chosen, whole = [step for step in live if step.step_id == only], True
        elif batch:
            chosen, whole = [step for step in live if step.step_id == 0], False
        elif full or job.spec.script is None:
            chosen, whole = live, True
        else:
            chosen, whole = [step for step in live if step.step_id != 0], True
        nodes = sorted({step.node_of(rank, job.node_names) for step in chosen for rank in step.live_ranks})
        steps = sorted(step.step_id for step in chosen)
        for node in nodes:
            self._outbox.append((node, SignalTask(job_id=job.job_id, signal=number, steps=steps, whole=whole)))
        return nodes
