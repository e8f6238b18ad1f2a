"""The node core's part that keeps descheduled tasks descheduled where they are watched, not frozen
(noded/holding.py has the mechanism; docs/architecture.md, "Descheduled means not running").

Every ``interval_s`` while some task is descheduled, the core asks the loop to
look at those tasks (``Watch``); the loop stops again each one that ran since
its stop and tells the core. A task found running in ``STRETCHES_TO_FAIL``
descheduled stretches in a row keeps resuming: its job is ended, FAILED, with
a reason that says so. A stray SIGCONT, once, is only undone.
"""

from gangsched.noded.task_states import TaskState

STRETCHES_TO_FAIL = 3


class DeschedulingWatch:
    def __init__(self, interval_s: float | None) -> None:
        """``interval_s``: between looks; None where descheduled tasks are frozen (nothing to look at)."""
        self.interval_s = interval_s

    @staticmethod
    def escaped(task: TaskState) -> str | None:
        """A look found ``task`` running while descheduled (and stopped it again): why its job must end,
        once it has happened in too many stretches in a row."""
        task.escapes += 1
        if task.escapes == 1:
            task.escaping_stretches += 1
        if task.escaping_stretches < STRETCHES_TO_FAIL:
            return None
        return (f"kept running while its gang was descheduled (found running in {task.escaping_stretches} "
                "descheduled stretches in a row: resumed by itself or another process of its account)")

    @staticmethod
    def resumed(task: TaskState) -> None:
        """Its gang's turn came: a stretch in which it never escaped ends the streak."""
        if task.escapes == 0:
            task.escaping_stretches = 0
        task.escapes = 0
