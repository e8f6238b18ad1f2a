"""A node daemon's launches, started in a thread of their own while the loop keeps applying switches.

A launch makes the task's groups, spawns its first process and moves it in:
a few milliseconds in a flood of short jobs, and longer where it waits on the
cgroup hierarchy's one lock, which the kernel's own workers hold as they
retire removed groups. A switch that came meanwhile waited for it: most of
the switch's latency in such a flood (docs/limits.md, "The switch in the
flood"). So a host whose starts take that long (``TaskHost.starts_beside``)
starts each task here, one at a time, and the loop, until this thread is
done, applies the switches that come and nothing else (noded/loop.py); it
then decides whether the task runs, with the last switch applied, before its
gate opens.

The thread runs just below the daemon's real-time priority, so that the
daemon's own wake-ups preempt it, and without SCHED_RESET_ON_FORK, so that a
first process starts at real-time priority until its exec (noded/task_start.py);
the interpreter hands its lock to a thread that waits for it within
``LOCK_HANDOVER_S`` (CPython's default, 5 ms, would hold a switch that long
behind the launch's Python).
"""

import logging
import os
import queue
import sys
import threading
from collections.abc import Callable
from typing import Any

from gangsched.daemon.realtime import realtime_priority

log = logging.getLogger("gangsched.noded")

LOCK_HANDOVER_S = 0.0002


class LaunchThread:
    def __init__(self) -> None:
        self.fd = os.eventfd(0, os.EFD_CLOEXEC | os.EFD_NONBLOCK)  # readable once a start is done
        self._work: queue.SimpleQueue[Callable[[], Any]] = queue.SimpleQueue()
        self._outcome: tuple[Any, BaseException | None] = (None, None)
        own = realtime_priority()
        priority = 0 if own is None else max(os.sched_get_priority_min(os.SCHED_FIFO), own - 1)
        sys.setswitchinterval(LOCK_HANDOVER_S)
        threading.Thread(target=self._serve, args=(priority,), name="launches", daemon=True).start()

    def start(self, work: Callable[[], Any]) -> None:
        """Run ``work`` in the thread; ``fd`` becomes readable when it is done."""
        self._work.put(work)

    def outcome(self) -> Any:
        """What the work done returned; what it raised, raised here."""
        os.eventfd_read(self.fd)
        value, error = self._outcome
        self._outcome = (None, None)
        if error is not None:
            raise error
        return value

    def _serve(self, priority: int) -> None:
        if priority:
            try:
                os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
            except OSError as error:  # it starts tasks all the same, at normal priority
                log.warning("the launch thread keeps normal priority: %s", error)
        while True:
            work = self._work.get()
            try:
                self._outcome = (work(), None)
            except BaseException as error:  # the launch's caller hears of it; the thread goes on
                self._outcome = (None, error)
            os.eventfd_write(self.fd, 1)
