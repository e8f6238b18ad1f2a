"""Slurm's names of a job's steps, without a model's import (Slurm's commands print them, and a command's
start is the most of its time): a batch job's step 0 is ``batch``, an salloc allocation's ``extern``, and
the steps after either counted from 0."""


def first_step_name(batch: bool, allocation: bool) -> str | None:
    """The name of a job's step 0 where it is not one of the job's own steps: a batch job's script, or the
    holder of an salloc allocation."""
    return "batch" if batch else "extern" if allocation else None


def step_name(first: str | None, step: int) -> str:
    """Slurm's name of step ``step`` of a job whose step 0 is named ``first`` (None: a step of its own)."""
    if first is None:
        return str(step)
    return first if step == 0 else str(step - 1)
