"""The cost of one scheduling event of a matrix policy, on a big, busy machine.

The matrix is filled (MPL rows of jobs) and the queue loaded to the size asked
for; then each measured event is what a real one is: a running job leaves (the
one due first), a new job arrives, and the policy rebuilds the matrix. Only
those three calls are timed; topping the queue back up between events is not.
"""

import math
import random
import statistics
import time
from dataclasses import dataclass

from gangsched.policy.matrix_policy import matrix_policy
from gangsched.policy.matrix_settings import MatrixPolicyKind
from gangsched.sim.sim_job import SimJob


@dataclass(frozen=True)
class EventTimes:
    policy: str
    nodes: int
    mpl: int
    queued: int  # mean queue length at the measured events
    running: int
    rows: int
    seconds: list[float]

    @property
    def median_ms(self) -> float:
        return statistics.median(self.seconds) * 1000

    @property
    def p95_ms(self) -> float:
        return sorted(self.seconds)[int(0.95 * (len(self.seconds) - 1))] * 1000

    @property
    def max_ms(self) -> float:
        return max(self.seconds) * 1000


def measure_events(kind: MatrixPolicyKind, nodes: int, mpl: int, queued: int, events: int,
                   seed: int = 1) -> EventTimes:
    rng = random.Random(seed)
    policy = matrix_policy(kind, nodes, mpl=mpl, migration_cost_s=10, migrate_per_slice=nodes // 4)
    ids = iter(range(1, 1 << 30))
    now = 0.0

    def arrival() -> SimJob:
        # sizes log-uniform over powers of two, as in the Lublin model's mode; estimates of minutes to hours
        width = min(nodes, 2 ** rng.randint(0, int(math.log2(nodes))))
        estimate = rng.uniform(60, 7200)
        return SimJob(next(ids), now, estimate, estimate, width)

    def top_up() -> None:
        while len(policy.queue) < queued:
            policy.submit(arrival(), now)
            policy.schedule(now)

    top_up()
    seconds, queue_lengths = [], []
    for _ in range(events):
        now += 1.0
        top_up()
        leaving = min(policy.matrix.placed.values(), key=lambda placed: placed.estimated_end).job
        new = arrival()
        queue_lengths.append(len(policy.queue))
        started = time.perf_counter()
        policy.finish(leaving, now)
        policy.submit(new, now)
        policy.schedule(now)
        seconds.append(time.perf_counter() - started)
    return EventTimes(kind.value, nodes, mpl, round(statistics.fmean(queue_lengths)), len(policy.matrix.placed),
                      len(policy.matrix.rows), seconds)
