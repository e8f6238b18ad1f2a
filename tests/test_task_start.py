"""A task's first process (noded/task_start.py): forked by the node daemon, held at its gate while the
daemon contains it, and only then the command, with nothing of the daemon's."""

import select
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from gangsched.noded.containment import Containment, choose_containment
from gangsched.noded.task_processes import Task, launch
from gangsched.protocol.records import TaskSpec
from tests.conftest import is_held, wait_until


@pytest.fixture
def node(tmp_path: Path) -> Iterator[tuple[Containment, Path]]:
    containment = choose_containment("start-test", tmp_path, "auto", True, None)
    yield containment, tmp_path
    containment.close()


def start(node: tuple[Containment, Path], argv: list[str], runnable: bool) -> Task:
    containment, spool = node
    spec = TaskSpec(job_id=1, rank=0, size=1, user="root", processor=0, argv=argv, cwd=str(spool), env={},
                    barrier_addr="ipc:///nowhere", barrier_bind="ipc:///nowhere", io_addr=None,
                    output=str(spool / "out"))
    return launch(spec, "start-test", (spool, spool), containment, runnable, None)


def exit_of(task: Task) -> int:
    readable, _, _ = select.select([task.pidfd], [], [], 30)
    assert readable, "the task did not end"
    returncode = task.reap()
    task.group.release()
    task.memory.release()
    return returncode


def test_a_task_started_stopped_runs_nothing_of_its_own_until_continued(node):
    marker = node[1] / "ran"
    task = start(node, ["/bin/sh", "-c", f"echo ran > {marker}"], runnable=False)
    process = psutil.Process(task.pid)
    wait_until(lambda: is_held(process), 10, "the first process held")
    assert process.exe() != "/bin/sh" and process.exe() != "/usr/bin/dash"  # not the command yet
    assert not marker.exists()
    task.resume()
    assert exit_of(task) == 0
    assert marker.read_text() == "ran\n"


def test_the_command_gets_default_signals_and_only_its_own_descriptors(node):
    # SIGPIPE is ignored in every Python process: a task must not inherit that, nor the daemon's sockets
    task = start(node, ["/bin/sh", "-c", "grep -E '^Sig(Ign|Blk)' /proc/self/status; ls /proc/self/fd"],
                 runnable=True)
    assert exit_of(task) == 0
    lines = (node[1] / "out").read_text().split()
    assert lines[:4] == ["SigBlk:", "0" * 16, "SigIgn:", "0" * 16]
    assert set(lines[4:]) <= {"0", "1", "2", "3"}  # 3: the listing's own folder


def test_a_command_not_found_fails_its_task_with_the_reason(node):
    task = start(node, ["no-such-command-here"], runnable=True)
    assert exit_of(task) == 127
    assert task.failure == "could not start: command not found on this node: no-such-command-here"


def test_a_working_folder_that_is_not_here_falls_back_to_the_spool(node):
    containment, spool = node
    spec = TaskSpec(job_id=2, rank=0, size=1, user="root", processor=0, argv=["/bin/pwd"],
                    cwd=tempfile.gettempdir() + "/no/such/folder", env={}, barrier_addr="ipc:///nowhere",
                    barrier_bind="ipc:///nowhere", io_addr=None, output=str(spool / "pwd"))
    task = launch(spec, "start-test", (spool, spool), containment, True, None)
    assert exit_of(task) == 0
    assert (spool / "pwd").read_text().strip() == str(spool)
