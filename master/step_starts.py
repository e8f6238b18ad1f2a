"""Starting a step in a running job's allocation (``StartStep``): whose it is to ask, and whether the
allocation has the tasks it names (master/job_steps.py says what a step is)."""

from gangsched.master.clock import Now
from gangsched.master.job_table import JobTable
from gangsched.master.starting import Starts
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.messages import ErrorReply, StartStep, StepStarted
from gangsched.protocol.records import JobState

# Slurm's MaxStepCount default: a job that runs more is refused the next (its steps are kept for its accounts)
MAX_STEPS = 40_000


class StepStarts:
    def __init__(self, table: JobTable, starts: Starts) -> None:
        self._table = table
        self._starts = starts

    def start(self, message: StartStep, now: Now) -> StepStarted | ErrorReply:
        job = self._table.get(message.job_id)
        if job is None:
            return ErrorReply(code=ErrorCode.UNKNOWN_JOB, reason=f"no active job {message.job_id}")
        if message.user not in (job.spec.user, "root"):
            return ErrorReply(code=ErrorCode.PERMISSION_DENIED,
                              reason=f"job {job.job_id} belongs to {job.spec.user}, not {message.user}")
        if job.state is not JobState.RUNNING or job.ending is not None or 0 not in job.steps:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"job {job.job_id} is {job.shown_state()}: a step "
                              "starts in a running job's allocation")
        tasks = len(job.node_names) // job.spec.cpus_per_task
        outside = [slot for slot in message.step.slots or [] if slot >= tasks]
        if outside:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"job {job.job_id}'s allocation has tasks 0-"
                              f"{tasks - 1}, not {outside[0]}: a step runs inside its allocation")
        if len(job.steps) >= MAX_STEPS:
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=f"job {job.job_id} ran {MAX_STEPS} steps, as many "
                              "as a job may")
        started = self._starts.start_step(job, message.step, now.wall)
        if isinstance(started, str):
            return ErrorReply(code=ErrorCode.INVALID_SPEC, reason=started)
        return StepStarted(job_id=job.job_id, step_id=started.step_id)
