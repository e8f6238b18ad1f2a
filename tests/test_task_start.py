"""A task's first process (noded/task_start.py): spawned by the node daemon, held at its gate while the
daemon contains it, and only then the command, with nothing of the daemon's. And the groups that contain
it, kept for the node's next task where it ended whole (noded/containment.py)."""

import os
import select
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psutil
import pytest

from gangsched.noded.containment import Containment, choose_containment
from gangsched.noded.task_processes import Task, TaskFolders
from gangsched.noded.task_processes import start as start_task
from gangsched.noded.task_start import close_inherited_on_exec
from gangsched.protocol.records import TaskSpec
from tests.helpers.clusters import is_held, wait_until

GLIBC_INTERNAL = (1 << 31) | (1 << 32)  # SigIgn's bits of signals 32 and 33


@dataclass
class Node:
    containment: Containment
    spool: Path
    tasks: list[Task] = field(default_factory=list)


@pytest.fixture
def node(tmp_path: Path) -> Iterator[Node]:
    close_inherited_on_exec()  # as a node daemon does as it starts
    here = Node(choose_containment("start-test", tmp_path, "auto", True, None), tmp_path)
    yield here
    for task in here.tasks:  # a test that failed half-way leaves none behind, stopped or frozen
        task.kill()
        task.resume()
        exit_of(task)
    here.containment.close()


def start(node: Node, argv: list[str], runnable: bool, cwd: str | None = None, output: str = "out",
          memory_limit: int | None = None) -> Task:
    spec = TaskSpec(job_id=len(node.tasks) + 1, rank=0, size=1, user="root", processors=[0], argv=argv,
                    cwd=cwd or str(node.spool), env={}, barrier_addr="ipc:///nowhere", barrier_bind="ipc:///nowhere",
                    io_addr=None, output=str(node.spool / output), memory_limit=memory_limit)
    folders = TaskFolders(node.spool, node.spool, None)
    task = start_task(spec, "start-test", folders, node.containment, None).go(runnable)
    node.tasks.append(task)
    return task


def exit_of(task: Task) -> int:
    readable, _, _ = select.select([task.pidfd], [], [], 30)
    assert readable, "the task did not end"
    returncode = task.reap()
    task.group.release()
    task.memory.release()
    return returncode


def ended(node: Node, task: Task) -> int:
    node.tasks.remove(task)
    return exit_of(task)


@pytest.mark.live
def test_a_task_started_stopped_runs_nothing_of_its_own_until_continued(node):
    marker = node.spool / "ran"
    task = start(node, ["touch", str(marker)], runnable=False)
    process = psutil.Process(task.pid)
    wait_until(lambda: is_held(process), 10, "the first process held")
    assert "touch" not in process.exe()  # not the command yet
    assert not marker.exists()
    task.resume()
    assert ended(node, task) == 0
    assert marker.exists()


@pytest.mark.live
def test_a_first_process_whose_daemon_dies_at_its_gate_ends_without_running_the_command(tmp_path):
    # what ends it is the gate itself, whose other end only the daemon holds (past the gate, the node's
    # watchdog: tests/test_containment.py); here a process of its own stands for the daemon, killed -9
    marker = tmp_path / "ran"
    daemon = subprocess.Popen(
        [sys.executable, "-c", "import sys, time\n"
         "from gangsched.noded.task_start import StartPlan, spawn_task\n"
         f"held = spawn_task(StartPlan(argv=['touch', {str(marker)!r}], env={{'PATH': '/usr/bin:/bin'}}, "
         f"cwd={str(tmp_path)!r}, fallback_cwd={str(tmp_path)!r}, output={str(tmp_path / 'out')!r}, cores=None, "
         "user=None, passed_fds=()))\n"
         "print(held.pid, flush=True)\n"
         "time.sleep(60)\n"], stdout=subprocess.PIPE, text=True)
    try:
        first = psutil.Process(int(daemon.stdout.readline()))  # type: ignore[union-attr]
        wchan = Path(f"/proc/{first.pid}/wchan")
        wait_until(lambda: wchan.read_text().endswith("pipe_read"), 10, "the first process reading its gate")
    finally:
        daemon.send_signal(signal.SIGKILL)
        daemon.wait()
    wait_until(lambda: not first.is_running() or first.status() == psutil.STATUS_ZOMBIE, 10,
               "the first process to end")
    assert not marker.exists()


@pytest.mark.live
def test_the_command_gets_default_signals_and_only_its_own_descriptors(node):
    # SIGPIPE is ignored in every Python process: a task must not inherit that, nor the daemon's sockets
    task = start(node, ["/bin/sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status; ls /proc/self/fd"],
                 runnable=True)
    assert ended(node, task) == 0
    lines = (node.spool / "out").read_text().split()
    assert lines[:3] == ["SigBlk:", "0" * 16, "SigIgn:"]
    # but the C library's own two (32 and 33, its thread cancellation and set-id broadcast), which its
    # posix_spawn leaves ignored and which it takes back in a program that uses them
    assert int(lines[3], 16) & ~GLIBC_INTERNAL == 0, lines[3]
    assert set(lines[4:]) <= {"0", "1", "2", "3"}  # 3: the listing's own folder


@pytest.mark.live
def test_a_command_not_found_fails_its_task_with_the_reason(node):
    task = start(node, ["no-such-command-here"], runnable=True)
    assert ended(node, task) == 127
    assert task.failure == "could not start: command not found on this node: no-such-command-here"


@pytest.mark.live
def test_a_working_folder_that_is_not_here_falls_back_to_the_spool(node):
    task = start(node, ["/bin/pwd"], runnable=True, cwd=tempfile.gettempdir() + "/no/such/folder", output="pwd")
    assert ended(node, task) == 0
    assert (node.spool / "pwd").read_text().strip() == str(node.spool)


@pytest.mark.live
def test_a_real_time_daemon_starts_its_tasks_at_normal_priority(node):
    # the first process runs at real-time priority until its exec (the daemon's spawn waits for it); the
    # command, and what it forks, must not
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO | os.SCHED_RESET_ON_FORK, os.sched_param(10))
    except PermissionError:
        pytest.skip("this account may not take real-time priority")
    try:
        task = start(node, ["/bin/sh", "-c", "cat /proc/$$/stat; cat /proc/self/stat"], runnable=True)
        spawner = os.sched_getscheduler(0)
    finally:
        os.sched_setscheduler(0, os.SCHED_OTHER, os.sched_param(0))
    assert spawner == os.SCHED_FIFO | os.SCHED_RESET_ON_FORK  # as before the spawn: what it forks next starts normal
    assert ended(node, task) == 0
    stats = (node.spool / "out").read_text().splitlines()
    policies = [int(stat.rpartition(")")[2].split()[38]) for stat in stats]  # the 41st field
    assert policies == [os.SCHED_OTHER, os.SCHED_OTHER], stats


@pytest.mark.live
def test_a_first_process_at_its_gate_is_not_counted_as_the_tasks_memory(node):
    task = start(node, ["/bin/true"], runnable=False)
    process = psutil.Process(task.pid)
    wait_until(lambda: is_held(process), 10, "the first process held")
    assert not task.command_started
    if task.memory.folder is None:  # read from its processes (else from its memory cgroup)
        assert task.read_memory().peak == 0  # the daemon's copy, not the task's
    task.resume()
    assert ended(node, task) == 0


BURNS = "import time\nheld = b'x' * (40 << 20)\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"


@pytest.mark.live
def test_a_task_that_ended_whole_leaves_its_groups_to_the_next_which_counts_only_its_own(node):
    if node.containment.kind != "cgroup" or node.containment.memory.version == 2:
        pytest.skip("no task groups are kept here: tasks are held by process tree, or their own group counts "
                    "their memory")
    first = start(node, [sys.executable, "-c", BURNS], runnable=True)
    _, cpu_ns, peak = exit_of_kept(node, first)
    assert cpu_ns >= 300_000_000 and peak >= 40 << 20
    second = start(node, ["/bin/true"], runnable=True)
    assert second.group.path == first.group.path and second.memory.folder == first.memory.folder
    assert second.group.path is not None and second.group.path.name.startswith("task-")
    _, cpu_ns, peak = exit_of_kept(node, second)
    assert cpu_ns < 100_000_000, "the first task's CPU counted to the second"
    assert peak < 5 << 20, "the first task's peak counted to the second"
    if node.containment.memory.version is None:
        return  # read from the processes: no limit the kernel holds
    limited = start(node, [sys.executable, "-c", "held = b'x' * (200 << 20)"], True, memory_limit=64 << 20)
    assert limited.group.path == first.group.path  # the limit given to the kept group
    readable, _, _ = select.select([limited.pidfd], [], [], 30)
    node.tasks.remove(limited)
    assert readable and limited.reap() != 0 and limited.read_memory().out_of_memory
    assert limited.group.release() and limited.memory.release()


@pytest.mark.live
def test_a_group_frozen_when_its_task_was_killed_holds_the_next_task_thawed(node):
    if not node.containment.freezes or node.containment.memory.version == 2:
        pytest.skip("no frozen task groups are kept here")
    held = start(node, [sys.executable, "-c", "import time; time.sleep(60)"], runnable=False)
    wait_until(lambda: is_held(psutil.Process(held.pid)), 10, "the task held at its gate")
    held.kill()
    exit_of_kept(node, held)
    after = start(node, ["/bin/true"], runnable=True)
    assert after.group.path == held.group.path
    assert exit_of_kept(node, after)[0] == 0  # it ran: its group was thawed


@pytest.mark.live
@pytest.mark.parametrize("leaves", ["its page cache", "a kill for its memory limit"])
def test_a_task_that_leaves_its_memory_group_counting_has_its_groups_removed_not_kept(node, leaves):
    if node.containment.kind != "cgroup" or node.containment.memory.version != 1:
        pytest.skip("only a task group with a cgroup v1 memory group is kept here")
    if leaves == "its page cache":
        task = start(node, ["/bin/sh", "-c", f"head -c {20 << 20} /dev/zero > {node.spool / 'written'}"], True)
    else:
        task = start(node, [sys.executable, "-c", "held = b'x' * (200 << 20)"], True, memory_limit=64 << 20)
    readable, _, _ = select.select([task.pidfd], [], [], 30)
    assert readable, "the task did not end"
    node.tasks.remove(task)
    assert (task.reap() == 0) == (leaves == "its page cache")
    assert not node.containment.keep(task.group, task.memory)
    assert task.group.release() and task.memory.release()
    assert task.group.path is not None and not task.group.path.exists()
    assert task.memory.folder is not None and not task.memory.folder.exists()


def exit_of_kept(node: Node, task: Task) -> tuple[int, int, int]:
    """The task's exit status, CPU time and memory peak, its groups kept for the next task."""
    readable, _, _ = select.select([task.pidfd], [], [], 30)
    assert readable, "the task did not end"
    node.tasks.remove(task)
    cpu_ns = task.take_cpu_ns()  # as the node reads it, before the reap
    returncode = task.reap()
    peak = task.read_memory().peak
    assert node.containment.keep(task.group, task.memory), "an emptied group not kept"
    return returncode, cpu_ns, peak
