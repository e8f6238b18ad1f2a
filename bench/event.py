"""The cost of one scheduling event of a matrix policy, on a big, busy machine.

The matrix is filled (MPL rows of jobs) and the queue loaded to the size asked
for; then each measured event is what a real one is: a running job leaves (the
one due first), a new job arrives, and the policy rebuilds the matrix. Only
those three calls are timed; topping the queue back up between events is not.

With ``node_memory``, every job asks 256 MiB to 2 GiB per task (Slurm's
``--mem-per-cpu``), drawn from a generator of its own so that the jobs' sizes
and estimates are the same as without, and every node has that memory. With
10 GiB (the default of `gang bench event --memory`: MPL 5 of the largest
request) memory never changes a decision, so the schedule is the one without
memory and the difference is the cost of counting it; with less, memory binds
and the policy's work changes with the schedule (docs/limits.md).
"""

import math
import random
import statistics
import time
from dataclasses import dataclass

from gangsched.policy.matrix_policy import matrix_policy
from gangsched.policy.matrix_settings import MatrixPolicyKind
from gangsched.policy.memory import NO_MEMORY, MemoryRequest
from gangsched.policy.topology import Topology
from gangsched.sim.sim_job import SimJob

MIB = 1 << 20
TASK_MEMORY = (256 * MIB, 512 * MIB, 1024 * MIB, 2048 * MIB)
HOLDS_EVERY_ROW = 5 * TASK_MEMORY[-1]  # MPL 5 of the largest request


@dataclass(frozen=True)
class EventTimes:
    policy: str
    node_memory: int | None
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
                   seed: int = 1, node_memory: int | None = None) -> EventTimes:
    rng, memory_rng = random.Random(seed), random.Random(seed + 1)
    topology = Topology.uniform(nodes, 1, node_memory)
    policy = matrix_policy(kind, nodes, mpl=mpl, migration_cost_s=10, migrate_per_slice=nodes // 4,
                           topology=topology)
    ids = iter(range(1, 1 << 30))
    now = 0.0

    def arrival() -> SimJob:
        # sizes log-uniform over powers of two, as in the Lublin model's mode; estimates of minutes to hours
        width = min(nodes, 2 ** rng.randint(0, int(math.log2(nodes))))
        estimate = rng.uniform(60, 7200)
        request = NO_MEMORY if node_memory is None else MemoryRequest(per_task=memory_rng.choice(TASK_MEMORY))
        return SimJob(next(ids), now, estimate, estimate, width, memory=request)

    def top_up() -> None:
        # the arrivals together and one event for them, as the master takes an array's: one event per
        # arrival made the set-up itself quadratic in the depth
        missing = queued - len(policy.queue)
        for _ in range(missing):
            policy.submit(arrival(), now)
        if missing > 0:
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
    return EventTimes(
        kind.value,
        node_memory,
        nodes,
        mpl,
        round(statistics.fmean(queue_lengths)),
        len(policy.matrix.placed),
        len(policy.matrix.rows),
        seconds,
    )
