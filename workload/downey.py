"""The Downey model as Zhou & Brent 2001 use it (§3): uniform-log sizes and run times,
exponential inter-arrival times (Poisson arrivals).

Sizes are log-uniform in [1, procs] and run times log-uniform in
[min_run, max_run] seconds, rounded to whole time slots (Zhou & Brent 2001 keep them
between 1 and 240 slots). The arrival rate is set by the load wanted:
rate = load * procs / E[size * run time].
"""

import math
import random
from dataclasses import dataclass

from gangsched.workload.swf import SwfJob, modelled_job


@dataclass(frozen=True)
class DowneyParameters:
    procs: int = 128
    slot_s: float = 1.0  # a time slot; run times are whole slots
    min_slots: int = 1
    max_slots: int = 240


def downey_jobs(count: int, load: float, seed: int, p: DowneyParameters = DowneyParameters()) -> list[SwfJob]:
    rng = random.Random(seed)
    shapes = [(_log_uniform_int(rng, 1, p.procs),
               _log_uniform_int(rng, p.min_slots, p.max_slots) * p.slot_s) for _ in range(count)]
    mean_work = sum(size * run for size, run in shapes) / max(1, count)
    rate = load * p.procs / mean_work
    jobs, now = [], 0.0
    for job_id, (size, run) in enumerate(shapes, start=1):
        now += rng.expovariate(rate)
        jobs.append(modelled_job(job_id, round(now, 2), run, size))
    return jobs


def _log_uniform_int(rng: random.Random, low: int, high: int) -> int:
    return max(low, min(high, round(math.exp(rng.uniform(math.log(low), math.log(high))))))
