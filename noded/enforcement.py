"""The node core's part that keeps descheduled tasks descheduled where they are watched, not frozen
(noded/holding.py has the mechanism; docs/architecture.md, "Descheduled means not running").

Every ``interval_s`` while some task is descheduled, the core asks the loop to
look at those tasks (``CheckDescheduled``); the executor stops again each one that ran since
its stop and tells the core. A task found running in ``STRETCHES_TO_FAIL`` of
its last ``STRETCHES_SEEN`` descheduled stretches keeps resuming: its job is
ended, FAILED, with a reason that says so. A stray SIGCONT, once, is only
undone; a stretch in which a look happened to miss it does not save a task
that resumes itself.
"""

from gangsched.noded.task_record import TaskRecord

STRETCHES_TO_FAIL = 3
STRETCHES_SEEN = 5
_SEEN = (1 << STRETCHES_SEEN) - 1


class DeschedulingWatch:
    def __init__(self, interval_s: float | None) -> None:
        """``interval_s``: between looks; None where descheduled tasks are frozen (nothing to look at)."""
        self.interval_s = interval_s

    @staticmethod
    def escaped(task: TaskRecord) -> str | None:
        """A look found ``task`` running while descheduled (and stopped it again): why its job must end,
        once it has happened in too many of its last stretches."""
        task.escapes += 1
        stretches = ((task.escaped_stretches << 1) | 1) & _SEEN  # this stretch, and the ones before
        if stretches.bit_count() < STRETCHES_TO_FAIL:
            return None
        return (f"kept running while its gang was descheduled (found running in {stretches.bit_count()} of its "
                f"last {STRETCHES_SEEN} descheduled stretches: resumed by itself or another process of its "
                "account)")

    @staticmethod
    def resumed(task: TaskRecord) -> None:
        """Its gang's turn came: the stretch it was descheduled in is done."""
        task.escaped_stretches = ((task.escaped_stretches << 1) | (task.escapes > 0)) & _SEEN
        task.escapes = 0
