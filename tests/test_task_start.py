"""A task's first process (noded/task_start.py): spawned by the node daemon, held at its gate while the
daemon contains it, and only then the command, with nothing of the daemon's."""

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
from gangsched.noded.task_processes import Task
from gangsched.noded.task_processes import start as start_task
from gangsched.noded.task_start import close_inherited_on_exec
from gangsched.protocol.records import TaskSpec
from tests.conftest import is_held, wait_until

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


def start(node: Node, argv: list[str], runnable: bool, cwd: str | None = None, output: str = "out") -> Task:
    spec = TaskSpec(job_id=len(node.tasks) + 1, rank=0, size=1, user="root", processor=0, argv=argv,
                    cwd=cwd or str(node.spool), env={}, barrier_addr="ipc:///nowhere", barrier_bind="ipc:///nowhere",
                    io_addr=None, output=str(node.spool / output))
    task = start_task(spec, "start-test", (node.spool, node.spool), node.containment, None).go(runnable)
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


def test_a_command_not_found_fails_its_task_with_the_reason(node):
    task = start(node, ["no-such-command-here"], runnable=True)
    assert ended(node, task) == 127
    assert task.failure == "could not start: command not found on this node: no-such-command-here"


def test_a_working_folder_that_is_not_here_falls_back_to_the_spool(node):
    task = start(node, ["/bin/pwd"], runnable=True, cwd=tempfile.gettempdir() + "/no/such/folder", output="pwd")
    assert ended(node, task) == 0
    assert (node.spool / "pwd").read_text().strip() == str(node.spool)


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


def test_a_first_process_at_its_gate_is_not_counted_as_the_tasks_memory(node):
    task = start(node, ["/bin/true"], runnable=False)
    process = psutil.Process(task.pid)
    wait_until(lambda: is_held(process), 10, "the first process held")
    assert not task.command_started
    if task.memory.folder is None:  # read from its processes (else from its memory cgroup)
        assert task.read_memory().peak == 0  # the daemon's copy, not the task's
    task.resume()
    assert ended(node, task) == 0
