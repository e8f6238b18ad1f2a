"""Real-time priority for the daemons, never for the jobs they start.

Under CFS a daemon woken while every core runs job tasks waits milliseconds for
a CPU; at SCHED_FIFO it preempts them at once (docs/limits.md: 4-node
switch skew 5 ms -> 0.65 ms median). SCHED_RESET_ON_FORK makes the kernel
start every child at normal priority, so a job can never inherit it. A FIFO
daemon must only ever block on sockets and timers: one that spins starves the
machine (the kernel's RT throttling leaves the rest 5 %).
"""

import gc
import logging
import os

import zmq

_FALLBACK_NICE = (-20, -15, -10, -5)


def raise_priority(priority: int, log: logging.Logger) -> bool:
    """Move this thread to SCHED_FIFO ``priority``; True on success.

    When refused, take the best negative nice value allowed, still resetting on
    fork, and say in the log that switches will be slower under load.
    """
    try:
        os.sched_setscheduler(
            0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(priority)
        )
    except PermissionError as refused:
        log.warning("real-time priority refused (%s): %s", refused.strerror, _fall_back())
        return False
    log.info("running at SCHED_FIFO priority %d; tasks start at normal priority", priority)
    return True


def realtime_priority() -> int | None:
    """The calling thread's real-time priority (SCHED_FIFO or SCHED_RR); None at normal priority."""
    if os.sched_getscheduler(0) & ~os.SCHED_RESET_ON_FORK not in (os.SCHED_FIFO, os.SCHED_RR):
        return None
    return os.sched_getparam(0).sched_priority


def freeze_start_up_objects() -> None:
    """Keep what the daemon holds once started (its modules, sockets, settings) out of the
    garbage collector's passes: a full pass over a daemon's imports alone takes about 10 ms,
    a pause that would fall inside a switch now and then, and at a thousand daemons in one
    process (`gang bench scale`) 20 ms."""
    gc.freeze()


class GrowthFreezer:
    """What a daemon takes in as it runs kept out of the collector's passes too. Python makes a full pass
    once its long-lived objects grew by a quarter: a master holding 100,000 pending jobs (1.3 million
    objects) paused about 0.3 s for each, every 20,000 jobs or so of a flood, quanta held back with it
    (docs/limits.md, "The collector at depth"). Once what the daemon holds grew by ``FREEZE_EVERY`` since
    the last freeze, what is alive is frozen, its young garbage collected first. A frozen object whose last
    reference goes is still freed; only garbage in cycles would stay, and a job makes none
    (tests/test_master_throughput.py)."""

    FREEZE_EVERY = 1_000

    def __init__(self, held: int) -> None:
        self._since = held

    def turn_ended(self, held: int) -> None:
        """``held``: how many things the daemon holds now (the master: its pending and running jobs)."""
        if held < self._since:
            self._since = held
        elif held - self._since >= self.FREEZE_EVERY:
            gc.collect(1)
            gc.freeze()
            self._since = held


def _fall_back() -> str:
    os.sched_setscheduler(0, os.SCHED_OTHER | os.SCHED_RESET_ON_FORK, os.sched_param(0))
    for nice in _FALLBACK_NICE:
        try:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
        except PermissionError:
            continue
        return f"running at nice {nice}; switches will lag under CPU load"
    return "running at normal priority; switches will lag by milliseconds under CPU load"


def zmq_context(realtime_priority: int | None) -> "zmq.Context[zmq.Socket[bytes]]":
    """A context whose I/O threads run at the daemon's real-time priority, if it has one.

    Must be called after ``raise_priority`` succeeded: libzmq aborts the
    process if it may not set the policy it was told to.
    """
    context = zmq.Context()
    if realtime_priority is not None:
        context.set(zmq.THREAD_SCHED_POLICY, os.SCHED_FIFO)
        context.set(zmq.THREAD_PRIORITY, realtime_priority)
    return context
