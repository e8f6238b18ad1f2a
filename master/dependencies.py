"""Slurm's job dependencies, ``afterok`` and ``afterany``: may a job be scheduled yet?

A job names earlier jobs. ``after_any``: it waits until each has ended, in any
state. ``after_ok``: until each has COMPLETED; if one ends in another state the
job can never start, and the master cancels it (Slurm would keep it pending as
DependencyNeverSatisfied unless told to kill it; a job no one will ever run is
better ended, with the reason). Plain code over the states it is given.
"""

from collections.abc import Callable
from typing import NamedTuple

from gangsched.protocol.records import JobSpec, JobState


class Dependencies(NamedTuple):
    waiting: list[int]  # the jobs it still waits for
    never: str | None  # why it can never start, if it cannot
    unknown: int | None = None  # a job it names that does not exist (then ``never`` says so)


def named(spec: JobSpec) -> list[int]:
    return list(dict.fromkeys([*spec.after_ok, *spec.after_any]))


def dependencies(spec: JobSpec, state_of: Callable[[int], JobState | None]) -> Dependencies:
    """Where ``spec``'s dependencies stand; ``state_of`` gives a job's state, None for no such job."""
    states = {job_id: state_of(job_id) for job_id in named(spec)}
    unknown = next((job_id for job_id, state in states.items() if state is None), None)
    if unknown is not None:
        return Dependencies([], f"job {unknown} does not exist", unknown)
    waiting = []
    for job_id, state in states.items():
        assert state is not None
        if not state.is_final:
            waiting.append(job_id)
        elif job_id in spec.after_ok and state is not JobState.COMPLETED:
            return Dependencies([], f"job {job_id} ended {state.value.upper()}, not COMPLETED (afterok)")
    return Dependencies(waiting, None)
