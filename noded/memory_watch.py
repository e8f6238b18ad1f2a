"""The node core's part for memory: each task's peak as read, and the moment it passes its limit
(noded/memory.py reads it; docs/memory.md)."""

from gangsched.noded.task_record import MemoryReading, TaskRecord


def passed_limit(task: TaskRecord, reading: MemoryReading) -> bool:
    """Take in a reading of ``task``: its peak grows; True the first time it is over its limit, when
    the task must be killed at once (no grace: it would go on allocating) and its job ends OUT_OF_MEMORY."""
    task.memory_peak = max(task.memory_peak, reading.peak)
    if not reading.out_of_memory or task.out_of_memory:
        return False
    task.out_of_memory = True
    return True
