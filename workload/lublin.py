"""The Lublin–Feitelson model of rigid parallel jobs (JPDC 63(11), 2003), used by Wiseman & Feitelson 2003.

With the model's "typeless" parameters (one class of jobs):

* **size**: serial with probability 0.244; otherwise log2(size) is drawn from a
  two-stage uniform on [0.8, 4.5] (probability 0.86) or [4.5, log2(machine)],
  rounded to a whole power of two with probability 0.576;
* **run time**: log(run time) is hyper-gamma: Gamma(4.2, 0.94) with probability
  p = -0.0054 * size + 0.78 (kept in [0, 1]), else Gamma(312, 0.03); draws above
  log(two days) = 12 are drawn again, so bigger jobs run longer;
* **arrivals**: log(inter-arrival) is Gamma(10.2303 * 1.0225, 0.4871) as at rush
  hours (draws above 13 are drawn again), stretched by a daily cycle: each of
  the 48 half-hour buckets of a day is weighted by the mass Gamma(8.1737, 3.9631)
  gives it (the day starting at bucket 11), so a gap costs more "points" in
  quiet buckets. The log starts at midnight.

Gamma(shape, scale) throughout. Sizes are capped at the machine's size.
"""

import math
import random
from dataclasses import dataclass

from gangsched.workload.swf import SwfJob, modelled_job

BUCKETS = 48
SECONDS_IN_BUCKET = 24 * 3600 // BUCKETS
CYCLIC_DAY_START = 11


@dataclass(frozen=True)
class LublinParameters:
    serial_prob: float = 0.244
    pow2_prob: float = 0.576
    u_low: float = 0.8
    u_med: float = 4.5
    u_prob: float = 0.86
    a1: float = 4.2
    b1: float = 0.94
    a2: float = 312.0
    b2: float = 0.03
    pa: float = -0.0054
    pb: float = 0.78
    a_arrive: float = 10.2303 * 1.0225  # the rush-hour shape times the all-day ratio
    b_arrive: float = 0.4871
    a_cycle: float = 8.1737
    b_cycle: float = 3.9631
    max_log_run_time: float = 12.0  # two days
    max_log_arrive_gap: float = 13.0  # five days


def lublin_jobs(
    count: int, max_procs: int, seed: int, parameters: LublinParameters = LublinParameters()
) -> list[SwfJob]:
    """``count`` jobs for a machine of ``max_procs`` processors, the same for the same seed."""
    rng = random.Random(seed)
    arrivals = _Arrivals(parameters, rng)
    jobs = []
    for job_id in range(1, count + 1):
        submit = arrivals.next()
        size = _size(parameters, max_procs, rng)
        run_time = _run_time(parameters, size, rng)
        jobs.append(modelled_job(job_id, submit, run_time, size))
    return jobs


def _size(p: LublinParameters, max_procs: int, rng: random.Random) -> int:
    u = rng.random()
    if u <= p.serial_prob:
        return 1
    high = math.log2(max_procs)
    if rng.random() <= p.u_prob:
        exponent = rng.uniform(p.u_low, min(p.u_med, high))
    else:
        exponent = rng.uniform(min(p.u_med, high), high)
    if u <= p.serial_prob + p.pow2_prob:
        exponent = round(exponent)
    return max(1, min(max_procs, round(2**exponent)))


def _run_time(p: LublinParameters, size: int, rng: random.Random) -> float:
    short_prob = min(1.0, max(0.0, p.pa * size + p.pb))
    while True:
        if rng.random() <= short_prob:
            log_time = rng.gammavariate(p.a1, p.b1)
        else:
            log_time = rng.gammavariate(p.a2, p.b2)
        if log_time <= p.max_log_run_time:
            return float(round(math.exp(log_time)))


class _Arrivals:
    """Arrival times with the daily cycle: gaps are paid for in bucket "points"."""

    def __init__(self, p: LublinParameters, rng: random.Random) -> None:
        self._p, self._rng = p, rng
        weights = [0.0] * BUCKETS
        for i in range(CYCLIC_DAY_START, BUCKETS + CYCLIC_DAY_START):
            weights[(i - 1) % BUCKETS] = (
                gamma_cdf(i + 0.5, p.a_cycle, p.b_cycle) - gamma_cdf(i - 0.5, p.a_cycle, p.b_cycle)
            )
        mean = sum(weights) / BUCKETS
        self._weights = [weight / mean for weight in weights]
        self._bucket = 0  # midnight
        self._points = 0.0
        self._remainder = 0.0
        self._time = 0.0

    def next(self) -> float:
        p, weights = self._p, self._weights
        gap = self._rng.gammavariate(p.a_arrive, p.b_arrive)
        while gap > p.max_log_arrive_gap:
            gap = self._rng.gammavariate(p.a_arrive, p.b_arrive)
        self._points += math.exp(gap) / SECONDS_IN_BUCKET
        elapsed = 0.0
        while self._points > weights[self._bucket]:
            self._points -= weights[self._bucket]
            self._bucket = (self._bucket + 1) % BUCKETS
            elapsed += SECONDS_IN_BUCKET
        remainder = self._points / weights[self._bucket]
        elapsed += SECONDS_IN_BUCKET * (remainder - self._remainder)
        self._remainder = remainder
        self._time += elapsed
        return round(self._time)


def gamma_cdf(x: float, shape: float, scale: float) -> float:
    """P(X <= x) for X ~ Gamma(shape, scale): the regularized lower incomplete gamma."""
    if x <= 0:
        return 0.0
    z = x / scale
    term = total = 1.0 / shape
    n = shape
    for _ in range(10_000):  # the series converges for every z; fast for those used here
        n += 1
        term *= z / n
        total += term
        if term < total * 1e-15:
            break
    return min(1.0, total * math.exp(-z + shape * math.log(z) - math.lgamma(shape)))
