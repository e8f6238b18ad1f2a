"""A job as the simulator sees it."""

from dataclasses import dataclass


@dataclass
class SimJob:
    job_id: int
    submit: float
    run_time: float  # dedicated run time: the work to do
    estimate: float  # what the user asked for; never below run_time after preparation
    procs: int
    start: float | None = None
    end: float | None = None
