"""The hyper-Erlang workload model of Zhang et al. 2000, §2 (after Jann et al. 1997), from given parameters.

Jobs fall into size classes whose upper bounds are powers of two. In each
class, inter-arrival times and service times each follow a hyper-Erlang
distribution of common order n: with probability p an Erlang(n, rate1),
otherwise an Erlang(n, rate2). The classes' streams are merged by time. A
job's size is uniform over its class's sizes (reconstructed: the paper does
not say). The papers' fitted values were in lost figures, so the parameters
are given by the user (``HyperErlangClass`` per class).
"""

import heapq
import random
from dataclasses import dataclass

from gangsched.workload.swf import SwfJob, modelled_job


@dataclass(frozen=True)
class HyperErlang:
    order: int
    p: float
    rate1: float  # per second
    rate2: float

    def draw(self, rng: random.Random) -> float:
        rate = self.rate1 if rng.random() < self.p else self.rate2
        return sum(rng.expovariate(rate) for _ in range(self.order))

    def mean(self) -> float:
        return self.order * (self.p / self.rate1 + (1 - self.p) / self.rate2)


@dataclass(frozen=True)
class HyperErlangClass:
    max_size: int  # sizes max_size // 2 + 1 .. max_size (1 for the first class)
    arrivals: HyperErlang
    service: HyperErlang


def smallest_size(max_size: int) -> int:
    """The smallest job size of the class whose largest is ``max_size``."""
    return max_size // 2 + 1 if max_size > 1 else 1


def hyper_erlang_jobs(count: int, classes: list[HyperErlangClass], seed: int) -> list[SwfJob]:
    rng = random.Random(seed)
    upcoming = [(spec.arrivals.draw(rng), index) for index, spec in enumerate(classes)]
    heapq.heapify(upcoming)
    jobs = []
    for job_id in range(1, count + 1):
        now, index = heapq.heappop(upcoming)
        spec = classes[index]
        size = rng.randint(smallest_size(spec.max_size), spec.max_size) if spec.max_size > 1 else 1
        run = round(spec.service.draw(rng), 2)
        jobs.append(modelled_job(job_id, round(now, 2), run, size))
        heapq.heappush(upcoming, (now + spec.arrivals.draw(rng), index))
    return jobs


def classes_from_json(text: str) -> list[HyperErlangClass]:
    """Classes as JSON: ``[{"max_size": 8, "arrivals": {"order": 2, "p": 0.5, "rate1": 0.01,
    "rate2": 0.001}, "service": {...}}, ...]``; a ValueError says what is wrong."""
    from pydantic import TypeAdapter, ValidationError  # here: a tenth of every `gang sim`'s start otherwise

    try:
        classes = TypeAdapter(list[HyperErlangClass]).validate_json(text)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the file"
        raise ValueError(f"{where}: {first['msg']}") from None
    if not classes:
        raise ValueError("no size classes")
    return classes
