"""Many node daemons in one process, for `gang bench scale`: each a real ``NodeDaemon`` (its
registration, heartbeats, columns, switch decode and apply, quantum reports, task exits),
all sharing one ZeroMQ context and one poll (bench/epoll_poller.py), with tasks that only
record what they are told.

The task host is the one part swapped: ``EmulatedHost`` starts no process. Its task is
busy whenever it is runnable (its CPU time is its runnable time), counts one barrier each
time it is continued, and exits when it is ended (its "pidfd" is an eventfd written then), so
the daemon's exit path runs as for a process. With ``--instant-tasks`` (`gang bench throughput
--emulated-nodes`) a task ends as soon as it first runs, as ``/bin/true`` does.

Run as ``python -m gangsched.bench.scale_agents --master ENDPOINT [--first I] --count N --spool DIR
[--instant-tasks]``;
it stops on SIGTERM, ending its daemons.
"""

import argparse
import heapq
import math
import os
import signal
import socket
import time
from pathlib import Path

import zmq

from gangsched.bench.epoll_poller import EpollPoller, SendNotingContext
from gangsched.daemon.realtime import freeze_start_up_objects
from gangsched.daemon.signals import SignalEvents
from gangsched.noded.loop import NodeDaemon, poll_ms
from gangsched.noded.process_managers.wiring import TaskWiring
from gangsched.noded.settings import NodeSettings
from gangsched.noded.stream_relay import StreamPipes
from gangsched.noded.task_processes import TaskFolders
from gangsched.noded.task_record import MemoryReading, TaskKey
from gangsched.protocol.records import TaskSpec

AGENT_PREFIX = "agent"
# nodes that share cores: each sends its report once the others have applied the switch, as in
# the docker cluster (docs/limits.md), so that sending them does not delay the switch
_REPORT_DELAY_MS = 30


class EmulatedTask:
    def __init__(self, spec: TaskSpec, runnable: bool, instant: bool = False) -> None:
        self.job_id, self.step, self.rank = spec.job_id, spec.step, spec.rank
        self.pidfd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self.uid = os.getuid()
        self.failure: str | None = None
        self.pmi: socket.socket | None = None  # no MPI here
        self.pipes: StreamPipes | None = None  # nor srun steps' streams
        self._cpu_from_ns: int | None = time.monotonic_ns() if runnable else None
        self._cpu_ns = 0
        self._progress = 0
        self._ended = False
        self._returncode = 0
        self._instant = instant  # it ends as soon as it runs
        if instant and runnable:
            self._exit(0)

    @property
    def pid(self) -> int:
        return 0

    def pids(self) -> list[int]:
        return []

    def take_in_new_processes(self) -> bool:
        return False

    def stop(self) -> None:
        self.take_cpu_ns()
        self._cpu_from_ns = None

    def resume(self) -> None:
        if self._cpu_from_ns is None:
            self._cpu_from_ns = time.monotonic_ns()
            self._progress += 1
        if self._instant:
            self._exit(0)

    def take_cpu_ns(self) -> int:
        now = time.monotonic_ns()
        if self._cpu_from_ns is not None:
            self._cpu_ns += now - self._cpu_from_ns
            self._cpu_from_ns = now
        taken, self._cpu_ns = self._cpu_ns, 0
        return taken

    def take_waited_ns(self) -> int:
        return 0  # an emulated task never waits for a core

    def read_progress(self) -> int:
        return self._progress

    def terminate(self) -> None:
        self._exit()

    def kill(self) -> None:
        self._exit()

    def checkpoint(self) -> None:
        self._exit()

    def deliver(self, signal_number: int, whole: bool) -> None:
        """An emulated task has no process to take a signal."""

    def close_pmi(self) -> None:
        pass

    def reap(self) -> int:
        os.close(self.pidfd)
        return self._returncode

    def keep_stopped(self) -> None:
        pass  # nothing resumes an emulated task but its switch

    def escaped(self) -> bool:
        return False

    def read_memory(self) -> MemoryReading:
        return MemoryReading(0, False)  # an emulated task holds no memory

    def _exit(self, returncode: int = -signal.SIGTERM) -> None:
        """Its end: by itself (an instant task, 0), or ended by the daemon (as SIGTERM would)."""
        if not self._ended:
            self._ended, self._returncode = True, returncode
            os.eventfd_write(self.pidfd, 1)


class EmulatedStart:
    """An emulated task about to start: it exists once it goes."""

    def __init__(self, host: "EmulatedHost", spec: TaskSpec) -> None:
        self._host, self._spec = host, spec

    def go(self, runnable: bool) -> EmulatedTask:
        return self._host.owned(EmulatedTask(self._spec, runnable, self._host.instant))

    def abandon(self) -> None:
        """Nothing was made."""


class EmulatedHost:
    """Tasks of one emulated node; ``owners`` learns which daemon each task's fd belongs to."""

    description = "emulation: no processes (gang bench scale)"
    watches_descheduled = False  # nothing resumes an emulated task but its switch
    forks = False
    runs_mpi = False  # a thousand daemons in one process: none loads an MPI library or looks for one
    starts_beside = False  # a start is an object made: no thread for it

    def __init__(self, owners: dict[object, NodeDaemon], instant: bool = False) -> None:
        self._owners, self.instant = owners, instant
        self.daemon: NodeDaemon | None = None

    def start(self, spec: TaskSpec, node: str, folders: TaskFolders, cores: set[int] | None,
              wiring: TaskWiring | None) -> "EmulatedStart":
        return EmulatedStart(self, spec)

    def owned(self, task: EmulatedTask) -> EmulatedTask:
        assert self.daemon is not None
        self._owners[task.pidfd] = self.daemon
        return task

    def ended(self, task: object) -> None:
        assert isinstance(task, EmulatedTask)
        self._owners.pop(task.pidfd, None)

    def sweep(self, live: set[TaskKey]) -> None:
        pass

    def close(self) -> None:
        pass


def agent_name(index: int) -> str:
    return f"{AGENT_PREFIX}{index:05d}"


def run_agents(master: str, first: int, count: int, spool: Path, instant: bool = False) -> None:
    context = SendNotingContext()  # which sockets were sent on, for the poller's recheck
    # seven sockets a daemon (three, two to relay, and the two of its DEALER's monitor), and room
    context.set(zmq.MAX_SOCKETS, 8 * count + 64)
    poller = EpollPoller()  # a poll over every daemon's sockets would cost more than the switch
    owners: dict[object, NodeDaemon] = {}
    daemons = []
    for name in map(agent_name, range(first, first + count)):
        host = EmulatedHost(owners, instant)
        settings = NodeSettings(
            master=master,
            name=name,
            cpu_share=1.0,
            processors=1,
            spool_dir=spool / name,
            peer_transport="ipc",
            realtime_priority=0,
            report_delay_ms=_REPORT_DELAY_MS,
        )
        daemon = NodeDaemon(settings, host=host, context=context, poller=poller)
        host.daemon = daemon
        owners.update({socket: daemon for socket in daemon.sockets})
        daemons.append(daemon)
    indices = {daemon: index for index, daemon in enumerate(daemons)}
    freeze_start_up_objects()
    # when each daemon's timers next fall due, as (time, index) in a heap; stale entries (a
    # daemon stepped earlier, for a message) are skipped: a step pushes its due time when it changed
    due = [(0.0, index) for index in range(count)]
    next_due = [0.0] * count
    with SignalEvents([signal.SIGTERM, signal.SIGINT]) as signals:
        poller.register(signals.fileno(), zmq.POLLIN)
        while True:
            ready = dict(poller.poll(poll_ms(due[0][0])))
            if signals.fileno() in ready and signals.drain():
                break
            # each daemon sees only its own sockets and fds: one poll's result holds a
            # thousand daemons', and each daemon looks through what it is given
            touched: dict[NodeDaemon, dict[object, int]] = {}
            for item, events in ready.items():
                owner = owners.get(item)
                if owner is not None:
                    touched.setdefault(owner, {})[item] = events
            now = time.monotonic()
            while due and due[0][0] <= now:
                at, index = heapq.heappop(due)
                if at == next_due[index]:
                    next_due[index] = math.nan  # its entry is gone: the step pushes the next
                    touched.setdefault(daemons[index], {})
            for daemon, mine in touched.items():
                due_at = daemon.step(mine)
                index = indices[daemon]
                # a switch seldom moves a daemon's timers: pushing only a new time keeps the heap
                # at about one entry a daemon, not one for each of its steps in the last 2 s
                if due_at != next_due[index]:
                    next_due[index] = due_at
                    heapq.heappush(due, (due_at, index))
            poller.recheck(context.sent)
            context.sent.clear()
    for daemon in daemons:
        daemon.close()
    poller.close()
    context.term()


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m gangsched.bench.scale_agents", description=__doc__)
    parser.add_argument("--master", required=True, help="the master's ROUTER endpoint")
    parser.add_argument("--first", type=int, default=0, help="the first node's index (their names are agentNNNNN)")
    parser.add_argument("--count", type=int, required=True, help="emulated nodes")
    parser.add_argument("--spool", type=Path, required=True, help="a folder for their spools")
    parser.add_argument("--instant-tasks", action="store_true", help="every task ends as soon as it first runs")
    options = parser.parse_args()
    run_agents(options.master, options.first, options.count, options.spool, options.instant_tasks)


if __name__ == "__main__":
    main()
