"""Slurm's job dependencies, ``afterok``, ``afterany``, ``afternotok`` and ``singleton``: may a job be
scheduled yet?

A job names earlier jobs. ``after_any``: it waits until each has ended, in any
state. ``after_ok``: until each has COMPLETED; ``after_not_ok``: until each has
ended in another state (FAILED, TIMEOUT, NODE_FAIL, OUT_OF_MEMORY, CANCELLED).
If one ends as the job waits for none to, the job can never start, and the
master cancels it (Slurm would keep it pending as DependencyNeverSatisfied
unless told to kill it; a job no one will ever run is better ended, with the
reason). ``singleton``: it waits while another job of its user and name runs,
is suspended or waits in the policy's queue, or is a singleton that came
before it, so that one of them at a time runs, in the order they came. Plain
code over the states it is given.
"""

from collections.abc import Callable, Iterable
from typing import NamedTuple

from gangsched.protocol.records import JobSpec, JobState


class Dependencies(NamedTuple):
    waiting: list[int]  # the jobs it still waits for
    never: str | None  # why it can never start, if it cannot
    unknown: int | None = None  # a job it names that does not exist (then ``never`` says so)


class Sibling(NamedTuple):
    """Another job of the same user and name, as a singleton's wait reads it."""

    job_id: int
    state: JobState
    past_the_gate: bool  # pending in the policy's queue (not held back), running or suspended
    singleton: bool
    held: bool


def named(spec: JobSpec) -> list[int]:
    return list(dict.fromkeys([*spec.after_ok, *spec.after_any, *spec.after_not_ok]))


def dependencies(spec: JobSpec, state_of: Callable[[int], JobState | None]) -> Dependencies:
    """Where ``spec``'s dependencies on named jobs stand; ``state_of`` gives a job's state, None for no such
    job."""
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
        elif job_id in spec.after_not_ok and state is JobState.COMPLETED:
            return Dependencies([], f"job {job_id} COMPLETED (afternotok)")
    return Dependencies(waiting, None)


def singleton_blocker(job_id: int, siblings: Iterable[Sibling]) -> int | None:
    """The job a singleton ``job_id`` waits for, of its user's others of its name; None: it may go on."""
    for other in siblings:
        if other.job_id == job_id or other.state.is_final:
            continue
        if other.past_the_gate or (other.singleton and not other.held and other.job_id < job_id):
            return other.job_id
    return None
