"""The ends of tasks, as the node daemons report them (``TaskExit``): what each one measured, whether it ends
its step or its job, and its acknowledgement once the store has it (master/ending.py)."""

from gangsched.master.clock import Now
from gangsched.master.ending import Endings
from gangsched.master.job_record import Job
from gangsched.master.job_table import JobTable
from gangsched.master.placement import limit_of
from gangsched.master.starting import Starts
from gangsched.protocol.exits import CHECKPOINTED
from gangsched.protocol.messages import ExitAck, TaskExit
from gangsched.protocol.records import JobState
from gangsched.protocol.sizes import readable


class TaskExits:
    def __init__(self, table: JobTable, starts: Starts, endings: Endings) -> None:
        self._table = table
        self._starts = starts
        self._endings = endings

    def ended(self, message: TaskExit, now: Now) -> ExitAck | None:
        """A task's end, the decisions it may bring left to the turn's scheduling pass (``MasterCore.scheduling_pass``):
        one after a batch of ends (a node's welcome, a drain of the report socket), not one for each end of a flood
        of small jobs.
        Its acknowledgement, or None while the store has not taken the end (master/ending.py: sent then)."""
        step_id, rank = message.step, message.rank
        self._starts.arrived(message.job_id, step_id, rank)
        ack = ExitAck(job_id=message.job_id, step=step_id, rank=rank)
        job = self._table.get(message.job_id)
        if job is None or not job.is_live(step_id, rank):
            return ack
        job.measured(step_id, message.cpu_ns, message.memory_peak)
        self._table.charge(job.spec.user, job.cpu_uncharged())
        if rank == 0 and step_id == 0:
            job.record_progress(now.monotonic, now.wall, message.progress)
        ending = None
        migration = job.migration
        task = f"rank {rank}" + (f" of step {step_id}" if step_id else "")
        if migration and not migration.restarted and message.error is None and message.returncode == CHECKPOINTED \
                and step_id == 0:
            job.checkpointed(rank)
        elif message.out_of_memory:
            limit = limit_of(job, job.steps[step_id], rank)
            ending = (JobState.OUT_OF_MEMORY, f"{task} on {message.node} passed its memory limit "
                      f"of {readable(limit)} (peak {readable(message.memory_peak)})")
        elif message.error is not None or message.returncode != 0:
            what = message.error or f"exited with {_describe(message.returncode)}"
            ending = (JobState.FAILED, f"{task} on {message.node} {what}")
        exit_code = message.returncode
        if ending is not None and exit_code:
            job.steps[step_id].task_failed(rank, exit_code)
        if not _kills_on_bad_exit(job, step_id):
            ending, exit_code = job.steps[step_id].failure_carried(rank, ending, exit_code)
        if ending is not None and step_id != 0:  # it ends its step, not the job
            self._endings.step_failed(job, step_id, rank, ending[1], exit_code, now)
        else:
            self._endings.ranks_gone(job, step_id, {rank}, ending, now, exit_code=exit_code)
        return self._endings.acknowledge(job, message.node, ack, now)


def _kills_on_bad_exit(job: Job, step_id: int) -> bool:
    spec = job.steps[step_id].spec
    return job.spec.kill_on_bad_exit if spec is None else spec.kill_on_bad_exit


def _describe(returncode: int | None) -> str:
    if returncode is not None and returncode < 0:
        return f"signal {-returncode}"
    return f"status {returncode}"
