"""The queues in priority order, arrival order among equals (docs/policies.md, "Priority order").

Whoever computes priorities (policy/multifactor.py, through the master or the
simulator) writes each waiting job's ``priority`` and then tells its policy
to reorder. A job that arrives goes after every job of its priority or
higher; a reorder is a stable sort, highest first. With every priority equal
(all weights zero) nothing ever moves: a queue is in arrival order, as it is
without priorities, and a job put back (requeued) goes to the end.
"""

from collections.abc import Callable
from typing import TypeVar

from gangsched.policy.interface import Job

Item = TypeVar("Item")


def _own_priority(job: Job) -> float:
    return job.priority


def insert_in_order(queue: list[Item], item: Item, priority: Callable[[Item], float]) -> None:
    """``item`` after every one of its priority or higher (the end, most often: a scan from there)."""
    rank = priority(item)
    index = len(queue)
    while index > 0 and priority(queue[index - 1]) < rank:
        index -= 1
    queue.insert(index, item)


def reorder(queue: list[Item], priority: Callable[[Item], float]) -> bool:
    """Sorted, highest first, equals in the order they were; whether anything moved."""
    ranks = [priority(item) for item in queue]
    if all(earlier >= later for earlier, later in zip(ranks, ranks[1:], strict=False)):
        return False
    queue.sort(key=lambda item: -priority(item))
    return True


def enqueue(queue: list[Job], job: Job) -> None:
    insert_in_order(queue, job, _own_priority)


def reorder_jobs(queue: list[Job]) -> bool:
    return reorder(queue, _own_priority)
