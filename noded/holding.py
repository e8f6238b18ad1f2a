"""What keeps a descheduled task descheduled (docs/architecture.md, "Descheduled means not running").

SIGSTOP and SIGCONT stay the switch: they take microseconds. But anyone who
may signal a task (the task itself, through a timer that sends it SIGCONT,
or any process of its account) can undo a SIGSTOP. So after a switch stops a
task, the node holds it:

* where the task has a cgroup v2 group of its own, the group is frozen
  (``cgroup.freeze``): no signal resumes a frozen task, and the processes it
  forks are frozen with it. Freezing is written after the switch is applied
  (the stop signal already holds the task); thawing comes before SIGCONT.
  A task on a terminal (``srun --pty``) is frozen and thawed without a
  signal: a process stopped in it was stopped by its shell's job control
  (^Z), and only the shell continues it (a ^Z typed while it is frozen is
  taken on the thaw, as the shell's).
* by process tree, the node notes the CPU time of the task's processes when
  it stopped them, and looks again every ``WATCH_INTERVAL_S`` and at each
  switch: a task that used more than ``ESCAPE_NS`` since is running, and is
  stopped again. Its job is ended if that happens in several descheduled
  stretches (noded/enforcement.py).
"""

import os
from collections.abc import Iterable
from pathlib import Path

# Why 50 ms between looks: a look is a wake-up of the node daemon (its timers, the order, a /proc read for
# each process of each descheduled task), about 0.2 ms of CPU in all; at 10 ms apart the looks cost each
# node 2 % of a core (gang bench switch --node-containment process-tree, docs/limits.md), at 50 ms about
# 0.4 %. A task that resumes itself then runs at most 50 ms, half a 100 ms quantum, before it is stopped
# again, and its job is ended after a few quanta of that (noded/enforcement.py).
WATCH_INTERVAL_S = 0.050
ESCAPE_NS = 1_000_000  # CPU a stopped task may show between looks (a signal's delivery, an exit's last work)


class Freezer:
    """A task's cgroup v2 freezer."""

    def __init__(self, group: Path) -> None:
        self._fd = os.open(group / "cgroup.freeze", os.O_WRONLY | os.O_CLOEXEC)
        self.frozen = False

    def freeze(self) -> None:
        os.write(self._fd, b"1")
        self.frozen = True

    def thaw(self) -> None:
        if self.frozen:
            os.write(self._fd, b"0")
            self.frozen = False

    def close(self) -> None:
        os.close(self._fd)


def supports_freezing(group: Path) -> bool:
    return (group / "cgroup.freeze").exists()


def cpu_ns_of(pids: Iterable[int]) -> int:
    """The CPU time the processes ``pids`` have used, from their schedstat (gone ones count 0)."""
    total = 0
    for pid in pids:
        try:
            with open(f"/proc/{pid}/schedstat", "rb") as stat:
                total += int(stat.read().split()[0])
        except (OSError, IndexError, ValueError):
            continue
    return total
