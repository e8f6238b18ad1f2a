"""srun --pty on a live cluster, typed into from a pseudo-terminal of the test's as a user's terminal: task 0 on
a terminal of its own on its node (its controlling terminal, the user's, the window's size), ^C to its
foreground, the shell's exit status srun's; frozen with its row and answering on its turn; its terminal
closed, nothing left; another account kept from it. And the benchmark of a key's echo (`gang bench pty`),
which drives the terminal as these tests do."""

import getpass
import os
import re
import subprocess
import time
from pathlib import Path

import psutil
import pytest

from gangsched.bench.terminal_echo import PROMPT, ShellTerminal, echo_latencies, figures, srun_shell
from gangsched.deploy.local import task_processes
from gangsched.protocol.records import JobSpec
from tests.helpers.accounts import unix_account
from tests.helpers.clusters import is_held, wait_until

pytestmark = pytest.mark.live
SHELL = ["bash", "--norc", "--noprofile", "-i"]
OPEN_EACH = """import sys
for path in sys.argv[1:]:
    for mode in ("rb", "wb"):
        try:
            open(path, mode)
            print("opened", path, mode)
        except PermissionError:
            pass"""


def shell(cluster, slurm, rows: int = 24, columns: int = 80, **environment: str) -> ShellTerminal:
    terminal = ShellTerminal([str(slurm / "srun"), "--pty", *SHELL], {**os.environ, "GANG_MASTER":
                             cluster.client.endpoint, "SLURM_JOB_ID": "", **environment}, rows, columns)
    terminal.read_until(PROMPT.encode(), 60)
    return terminal


def answer(terminal: ShellTerminal, command: str) -> str:
    """What the shell prints for ``command``, between the echo of its line and the next prompt."""
    terminal.type(command.encode() + b"\r")
    terminal.read_until(command.encode() + b"\r\n", 30)  # its echo (a prompt redrawn before it: dropped)
    text = terminal.read_until(PROMPT.encode(), 30).decode(errors="replace")
    return re.sub(r"\x1b\[[?0-9;]*[A-Za-z]", "", text).replace("\r", "").removesuffix(PROMPT).strip()


def leads_its_terminal(pid: int) -> bool:
    """Whether the process's group is its terminal's foreground group (/proc's stat: pgrp and tpgid)."""
    fields = Path(f"/proc/{pid}/stat").read_bytes().rpartition(b")")[2].split()
    return fields[2] == fields[5]


def test_task_0_has_a_terminal_of_the_window_s_size_that_takes_job_control_keys(start_cluster, slurm):
    cluster = start_cluster(nodes=2, processors_per_node=2)
    terminal = shell(cluster, slurm, rows=33, columns=101)
    name, owner, size = answer(terminal, 'tty; stat -c "%U %a" "$(tty)"; stty size').splitlines()
    assert re.fullmatch(r"/dev/pts/\d+", name) and size == "33 101", (name, size)
    assert owner == f"{psutil.Process().username()} 620", "the step's user's, as a login's terminal"
    session, pid, monitor = answer(terminal, "ps -o sid= -p $$ | tr -d ' '; echo $$; echo $-").splitlines()
    assert session == pid and "m" in monitor, "the shell leads its terminal's session, with job control"
    terminal.resize(40, 120)
    wait_until(lambda: answer(terminal, "stty size") == "40 120", 10, "the new size on the node")
    terminal.type(b"sleep 60\r")
    terminal.read_until(b"sleep 60", 10)
    time.sleep(0.5)
    terminal.type(b"\x03")  # raw at srun: the node's terminal makes it SIGINT for its foreground, sleep
    terminal.read_until(PROMPT.encode(), 10)
    assert answer(terminal, "echo $?") == "130"
    terminal.type(b"exit 7\r")
    assert terminal.process.wait(timeout=30) == 7
    terminal.hang_up()
    wait_until(lambda: cluster.client.jobs(include_finished=True)[0].state.is_final, 20, "srun's job to end")
    assert not task_processes(cluster.home)


def test_a_shell_is_frozen_with_its_row_and_answers_on_its_turn(start_cluster, slurm):
    """One processor, a busy job in one row and the shell in the other: at a 100 ms quantum the shell is
    stopped every other turn, and what is typed meanwhile is answered on its next; a job the shell stopped
    (^Z) is not continued with the shell's turns."""
    cluster = start_cluster(nodes=1, processors_per_node=1)
    busy = cluster.client.submit(JobSpec(name="spin", user=getpass.getuser(), tasks=1,
                                         argv=["sh", "-c", "while :; do :; done"]))
    wait_until(lambda: cluster.client.job(busy).state.value == "running", 20, "the busy job to run")
    terminal = shell(cluster, slurm)
    (job,) = [each.job_id for each in cluster.client.jobs() if each.job_id != busy]
    (process,) = wait_until(lambda: task_processes(cluster.home, job), 10, "the shell's process")
    states: set[bool] = set()
    for _ in range(100):
        states.add(is_held(process))
        time.sleep(0.01)
    assert states == {True, False}, "held and let go in turn"
    for _ in range(10):
        assert answer(terminal, "echo $((6 * 7))") == "42"
    terminal.type(b"sleep 100\r")
    terminal.read_until(b"sleep 100\r\n", 10)
    time.sleep(0.5)
    terminal.type(b"\x1a")  # ^Z: the shell's job stopped, and it stays stopped through the turns that follow
    assert "Stopped" in terminal.read_until(PROMPT.encode(), 10).decode()
    time.sleep(1)
    assert answer(terminal, "jobs").split()[1] == "Stopped"
    terminal.type(b"fg\r")
    terminal.read_until(b"sleep 100\r\n", 10)
    # the shell prints the job before it gives it the terminal: a ^C between the two is the shell's (as a
    # user's key typed then would be, under Slurm too), and the job is left running in the background
    (sleep,) = process.children()
    wait_until(lambda: leads_its_terminal(sleep.pid), 10, "sleep in its terminal's foreground")
    terminal.type(b"\x03")
    terminal.read_until(PROMPT.encode(), 10)
    left = answer(terminal, "jobs").split()  # the shell may still tell of its end: "[1]+ Interrupt sleep 100"
    assert not {"Stopped", "Running"} & set(left), left
    terminal.type(b"exit 3\r")
    assert terminal.process.wait(timeout=30) == 3
    terminal.hang_up()


def test_another_account_can_neither_read_nor_write_a_user_s_step_terminal(start_cluster, slurm):
    """As an attacker with a key of his own: the terminal the node opened for her shell is hers (620, group
    tty), so he cannot open it to read her keys or type into her shell, nor reach it through her shell's
    descriptors."""
    for user in ("gangalice", "gangbob"):  # a root node daemon runs a job as its user's account
        unix_account(user)
    cluster = start_cluster(key_users=("gangalice", "gangbob"), nodes=1, keys=True)
    terminal = shell(cluster, slurm, GANG_MASTER=cluster.local.state().master, GANG_KEYS=str(cluster.local.keys),
                     LOGNAME="gangalice")
    name, owner, pid = answer(terminal, 'tty; stat -c "%U %a" "$(tty)"; echo $$').splitlines()
    assert owner == "gangalice 620", "her shell on a terminal of hers"
    as_bob = subprocess.run(["setpriv", "--reuid", "gangbob", "--regid", "gangbob", "--clear-groups",
                             "/usr/bin/python3", "-c", OPEN_EACH, name, f"/proc/{pid}/fd/0"],
                            capture_output=True, text=True, timeout=30, cwd="/")
    assert (as_bob.returncode, as_bob.stdout, as_bob.stderr) == (0, "", ""), "her terminal opened by him"
    assert answer(terminal, "echo still hers") == "still hers", "nothing he typed reached her shell"
    terminal.type(b"exit\r")
    assert terminal.process.wait(timeout=30) == 0
    terminal.hang_up()


def test_a_closed_terminal_ends_the_step_and_leaves_nothing(start_cluster, slurm):
    cluster = start_cluster(nodes=1, processors_per_node=1)
    terminal = shell(cluster, slurm)
    terminal.type(b"sleep 300 & sleep 300\r")
    terminal.read_until(b"sleep 300\r\n", 10)
    (job,) = [each.job_id for each in cluster.client.jobs()]
    wait_until(lambda: len(task_processes(cluster.home, job)) == 3, 10, "the shell and its two sleeps")
    terminal.hang_up()  # SIGHUP to srun, which ends; its node finds it gone
    assert terminal.process.wait(timeout=10) != 0
    wait_until(lambda: cluster.client.job(job).state.is_final, 30, "the job to end without its srun")
    wait_until(lambda: not task_processes(cluster.home), 10, "nothing left running or stopped")


def test_the_echo_benchmark_times_each_key_through_srun_pty(start_cluster, slurm):
    cluster = start_cluster(nodes=1, processors_per_node=1)
    taken = echo_latencies(srun_shell(slurm / "srun"), {**os.environ, "GANG_MASTER": cluster.client.endpoint}, 25)
    row = figures("srun", taken)
    assert row["keys"] == 25 and 0 < row["median_ms"] <= row["p99_ms"] <= row["max_ms"], row
    wait_until(lambda: cluster.client.jobs(include_finished=True)[0].state.is_final, 20, "the shell's job to end")
