"""Run-time estimates by the β model of overestimation (Zhang et al. 2000, §2).

Draw y uniformly in [0, 1): if y < β the estimate is the run time, otherwise
it is run time * (1 - β) / (1 - y). β = 1 gives exact estimates; smaller β
overestimates more jobs, without bound as y approaches 1.
"""

import random

from gangsched.workload.swf import SwfJob


def beta_estimates(jobs: list[SwfJob], beta: float, seed: int) -> list[SwfJob]:
    if not 0.0 <= beta <= 1.0:
        raise ValueError(f"β is a fraction in [0, 1], not {beta}")
    rng = random.Random(seed)
    estimated = []
    for job in jobs:
        y = rng.random()
        factor = 1.0 if y < beta else (1.0 - beta) / (1.0 - y)
        estimated.append(job._replace(req_time=round(job.run_time * factor, 2)))
    return estimated
