"""How tasks that share a core slow each other: the CPU model of the quantum simulation (sim/quanta.py).

A job of utilization u, running alone on its processors, computes for a share
u of the time and waits (communication, I/O, a barrier's peers) for the rest,
as the synthetic programs of Wiseman & Feitelson 2003 do. Per second of its
work (its dedicated run time), each task needs c = u·s core-seconds of CPU,
where s is its processor's share of a core (1 on a real node; cores/processors
where the emulated nodes of one machine share its cores), and w = 1 − u
seconds of waiting. A task may use more than its processor's share where its
core has room, up to the whole core (u = 1/s, w = 0): a program's CPU-bound
start, for one.

A job's tasks leave each barrier together and so compute at the same time: its
k tasks on one core count as one task of k·c core-seconds and w of waiting.
Different jobs' tasks on one core share it as processor sharing, in the fluid
view: one second of work takes t_i = w_i + c_i·β seconds, where β ≥ 1
stretches every computing phase alike; β = 1 while the core keeps up
(Σ c_i / t_i ≤ 1), and otherwise the β at which the core is just busy all the
time. A task alone on a whole core (s < 1) therefore runs faster than its
dedicated run time, as it does on the local cluster. A job goes at the pace of
its slowest core. (Reconstructed: neither paper models this; the faster tasks'
idle time at the barrier is not given back to their cores' other tasks, which
makes the model a little pessimistic where a core is overloaded.)
"""

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from gangsched.policy.cores import even_share

_PRECISION = 1e-6


@dataclass(frozen=True)
class Cores:
    """Which core each column (processor) of the matrix runs on, and its share of that core."""

    of_column: tuple[int, ...]
    share: float  # s: a column's CPU, in cores, that its utilization is measured against

    @classmethod
    def dedicated(cls, columns: int) -> "Cores":
        """A real cluster: every processor a core of its own."""
        return cls(tuple(range(columns)), 1.0)

    @classmethod
    def pinned(cls, nodes: int, processors_per_node: int, cores: int) -> "Cores":
        """The local cluster's emulated nodes on a machine of ``cores`` cores: each node keeps to its even
        share of them and each processor to its share of its node's (policy/cores.py); a processor is
        measured against cores / processors, and its single-threaded task computes on its first core."""
        machine = range(cores)
        of_column = tuple(
            even_share(processor, processors_per_node, even_share(node, nodes, machine))[0]
            for node in range(nodes) for processor in range(processors_per_node)
        )
        return cls(of_column, cores / (nodes * processors_per_node))


def stretch(tasks: Sequence[tuple[float, float]]) -> float:
    """β for the tasks (c, w) on one core: the least β ≥ 1 with Σ c / (w + c·β) ≤ 1."""

    def demand(beta: float) -> float:
        return sum(c / (w + c * beta) for c, w in tasks if c > 0)

    if demand(1.0) <= 1.0:
        return 1.0
    low, high = 1.0, 2.0
    while demand(high) > 1.0:
        low, high = high, high * 2
    while high - low > _PRECISION * high:
        middle = (low + high) / 2
        low, high = (middle, high) if demand(middle) > 1.0 else (low, middle)
    return high


def job_rates(running: Mapping[int, tuple[float, Sequence[int]]], cores: Cores) -> dict[int, float]:
    """Seconds of work done per second by each running job, given as job id -> (utilization in % of its
    processors, up to a whole core: 100 / share; columns)."""
    on_core: dict[int, dict[int, int]] = {}  # core -> job -> how many of its tasks run there
    used: dict[int, float] = {}  # job -> its utilization as a fraction, within a whole core
    for job_id, (utilization, columns) in running.items():
        used[job_id] = min(max(utilization, 0.0), 100.0 / cores.share) / 100
        for column in columns:
            tasks = on_core.setdefault(cores.of_column[column], {})
            tasks[job_id] = tasks.get(job_id, 0) + 1
    rates: dict[int, float] = {}
    for tasks in on_core.values():
        demands = {job_id: (count * used[job_id] * cores.share, max(0.0, 1.0 - used[job_id]))
                   for job_id, count in tasks.items()}
        beta = stretch(list(demands.values()))
        for job_id, (c, w) in demands.items():
            core_rate = 1.0 / (w + c * beta) if w + c * beta > 0 else 1.0
            rates[job_id] = min(rates.get(job_id, core_rate), core_rate)
    return rates
