"""The messages that start a step in a running job's allocation (``StartStep``, answered by
``StepStarted`` or ``ErrorReply``): what Slurm's ``srun`` inside an allocation asks of its controller."""

from typing import Literal

from gangsched.protocol.records import StepId, StepSpec, WireModel


class StartStep(WireModel):
    """``user`` asks that job ``job_id``, running, run ``step`` on its allocation (the job's owner or root)."""

    type: Literal["start_step"] = "start_step"
    job_id: int
    user: str
    step: StepSpec


class StepStarted(WireModel):
    """The step's tasks went to their nodes, as step ``step_id`` of the job."""

    type: Literal["step_started"] = "step_started"
    job_id: int
    step_id: StepId
