"""Where a node daemon's tasks run: the daemon asks its host to start them, to forget the ended
ones and, every heartbeat, to sweep what they left.

``ProcessHost`` runs each task as real processes held by the node's containment
(cgroups, or a subreaper tree: ``containment``). `gang bench scale` gives the daemon
an emulated host instead (gangsched/bench/scale_agents.py), the one part of a node
daemon it swaps, so that a thousand daemons' switch paths run in one process.
"""

import os
from pathlib import Path
from typing import Protocol

from gangsched.noded.containment import choose_containment
from gangsched.noded.memory import TaskMemory
from gangsched.noded.node_task import NodeTask
from gangsched.noded.process_managers.wiring import TaskWiring
from gangsched.noded.task_groups import TaskGroup
from gangsched.noded.task_processes import StartingTask, Task, TaskFolders, start
from gangsched.noded.task_record import TaskKey
from gangsched.noded.task_start import close_inherited_on_exec, setpriv
from gangsched.protocol.records import TaskSpec


class Starting(Protocol):
    """A task started and held before any of its own code runs (``task_processes.StartingTask``)."""

    def go(self, runnable: bool) -> NodeTask: ...
    def abandon(self) -> None: ...


class TaskHost(Protocol):
    description: str  # for the daemon's log
    watches_descheduled: bool  # whether the node must look for descheduled tasks that run anyway
    forks: bool  # whether its tasks are processes that can start others, which a switch's signals must reach
    runs_mpi: bool  # whether its tasks can be MPI programs, which its process-manager interfaces serve
    starts_beside: bool  # whether ``start`` takes long enough to run beside the switch path (a thread)

    def start(self, spec: TaskSpec, node: str, folders: TaskFolders, cores: set[int] | None,
              wiring: TaskWiring | None) -> Starting: ...
    def ended(self, task: NodeTask) -> None: ...
    def sweep(self, live: set[TaskKey]) -> None: ...
    def close(self) -> None: ...


class ProcessHost:
    forks = True
    runs_mpi = True
    starts_beside = True

    def __init__(self, node: str, spool: Path, wanted: str, freeze: bool = True,
                 cgroup_parent: Path | None = None, cgroup_delegated: bool = False, pids_max: int = 0,
                 pids_v1: bool = False) -> None:
        if os.geteuid() == 0:  # a root daemon runs other users' tasks, which need it (task_processes.task_account)
            setpriv()  # found now, so that a node without it says so as it starts, not at each such task
        close_inherited_on_exec()
        self._containment = choose_containment(node, spool, wanted, freeze, cgroup_parent, cgroup_delegated,
                                               pids_max, pids_v1)
        # where descheduled tasks are not frozen, the node looks for those that run anyway
        self.watches_descheduled = not self._containment.freezes
        self._unreleased: list[TaskGroup] = []  # groups of ended tasks whose last processes are dying
        self._unreleased_memory: list[TaskMemory] = []  # their memory groups (cgroup v1), likewise
        self.description = self._containment.description

    def start(self, spec: TaskSpec, node: str, folders: TaskFolders, cores: set[int] | None,
              wiring: TaskWiring | None) -> StartingTask:
        return start(spec, node, folders, self._containment, cores, wiring)

    def ended(self, task: NodeTask) -> None:
        assert isinstance(task, Task)
        if self._containment.keep(task.group, task.memory):
            return
        if not task.group.release():
            self._unreleased.append(task.group)
        if not task.memory.release():
            self._unreleased_memory.append(task.memory)

    def sweep(self, live: set[TaskKey]) -> None:
        self._containment.reap_strays(live)
        self._unreleased = [group for group in self._unreleased if not group.release()]
        self._unreleased_memory = [memory for memory in self._unreleased_memory if not memory.release()]

    def close(self) -> None:
        self._containment.close()
