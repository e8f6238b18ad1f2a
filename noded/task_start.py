"""The first process of every task: spawned by the node daemon, held at a gate, then it becomes the task.

It is spawned, not forked: ``posix_spawn`` shares the daemon's memory until the
exec (vfork), where a fork of the daemon copied its page tables and every page
either side wrote while the child waited at its gate, and the exec then tore
all of it down: half of a node daemon's CPU in a flood of short jobs
(docs/limits.md, "Throughput"). What the child did in Python before its exec
is done by small programs every Linux host has, none of them the user's:

1. the daemon spawns it in a session of its own with every signal at its
   default and none blocked (SIGPIPE, which Python ignores, included), its
   standard streams on ``/dev/null`` (a step of srun's: on pipes to the daemon, which relays them, or
   a pseudo-terminal, its controlling terminal, for srun --pty) and
   nothing of the daemon's open but
   the gate (fd 3), the status pipe (fd 4), the task's environment (fd 5)
   and the task's own descriptors (an MPI task's PMI socket; everything the
   daemon opens is close-on-exec), at the lowest real-time priority until
   its exec where the daemon has a real-time one (``_realtime_child``), and
   at normal priority from the spawn's return on. For another user's task
   its environment is the system's ``PATH`` alone: nothing a user exports
   (``LD_PRELOAD``, ``LD_LIBRARY_PATH``, ``GCONV_PATH``, ``GLIBC_TUNABLES``,
   ...) reaches a program that runs with the daemon's rights; a task of the
   daemon's own user gets its environment with the spawn, its account's to
   give;
2. ``/bin/sh`` waits at the gate while the daemon puts it in the task's
   cgroup (or process tree), pins it to the task's cores and stops it if the
   task's row is not the one running; then the daemon opens the gate, so no
   code of the user's runs outside the group or its slot. For another
   user's task the shell at the gate runs as the daemon's user and only
   then ``setpriv`` (util-linux) takes the user's groups, gid and uid;
3. the shell, with the user's rights, gives up if the daemon is already gone
   (its parent is another), takes the submitter's umask, enters the working
   folder (else the spool), opens the output, and only then reads another
   user's task's environment from fd 5 (a memfd of ``export NAME='value'``
   lines the daemon wrote, quoted so that nothing in a value is ever run;
   empty for the daemon's own user's);
4. closes the status pipe and execs the command, found on the task's PATH.

What ends a task whose daemon dies: at the gate, the gate itself (the shell
reads its end and exits); past it, the node's watchdog (noded/watchdog.py),
which kills every process of the node's tasks, since each is in its group or
carries the daemon's mark by then. Tasks of the daemon's own user started
through ``setpriv`` too, which asked the kernel to kill the first process at
the daemon's death: a program more than the gate and the watchdog need,
about a fifth of the machine's CPU in a flood of short jobs (docs/limits.md,
"One program fewer a task").

If a step fails, the shell writes why to the status pipe and exits 127; the
daemon reads that when the task exits and fails the job with it. The status
pipe is closed right before the exec, so the daemon reads nothing from a task
that started.
"""

import contextlib
import fcntl
import functools
import os
import re
import select
import shutil
import signal
from collections.abc import Iterator
from dataclasses import dataclass

from gangsched.daemon.realtime import realtime_priority
from gangsched.noded.spawn import FileAction, spawn

GATE_FD, STATUS_FD, ENVIRONMENT_FD = 3, 4, 5
_GO = b"g\n"
SHELL = "/bin/sh"
# the whole environment of what runs before the task's own (the gate, setpriv): the system's programs
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
# what /bin/sh can export; a name it cannot is dropped by it in any case (a spec's names are all of these)
_SHELL_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")

# $1 daemon pid, $2 working folder, $3 fallback folder, $4 output ("": the standard streams it was given, a
# step's pipes to its srun), $5 error output ("": the output), $6
# "truncate" to empty them first, $7 "wait" to wait at the gate here, $8 umask; then argv. The task's
# environment comes last, so that none of its names is one of these.
_BECOME = r"""
daemon=$1 cwd=$2 fallback=$3 out=$4 err=$5 open=$6 gate=$7 mask=$8
shift 8
if [ "$gate" = wait ]; then read -r go <&3 || exit 127; fi
exec 3<&-
[ "$PPID" = "$daemon" ] || { printf 'the node daemon is gone' >&4; exit 127; }
umask "$mask"
cd -- "$cwd" 2>/dev/null || cd -- "$fallback" 2>/dev/null || { printf 'cannot enter %s' "$fallback" >&4; exit 127; }
cannot_open() {
    printf 'cannot open the output %s: %s' "$1" "$( (: >>"$1") 2>&1 | sed 's/.*: //')" >&4; exit 127
}
if [ -z "$out" ]; then
    :
elif [ -z "$err" ] && [ "$open" != truncate ]; then
    command exec >>"$out" 2>&1 || cannot_open "$out"
else
    for file in "$out" ${err:+"$err"}; do
        if [ "$open" = truncate ]; then command : 2>/dev/null >"$file"; else command : 2>/dev/null >>"$file"; fi ||
            cannot_open "$file"
    done
    command exec >>"$out" 2>>"${err:-$out}" || cannot_open "$out"
fi
. /dev/fd/5
exec 5<&-
command -v -- "$1" >/dev/null || { printf 'command not found on this node: %s' "$1" >&4; exit 127; }
exec 4>&-
exec "$@"
"""
# another user's task: the gate here, as the daemon's user; then setpriv and _BECOME as the user
_GATE = r"""read -r go <&3 || exit 127; exec 3<&-; exec "$@" """


class MissingTool(Exception):
    """A program the node's task start needs is not installed."""


@dataclass(frozen=True)
class Account:
    uid: int
    gid: int
    groups: list[int]


@dataclass(frozen=True)
class StartPlan:
    """What the first process needs to become the task."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    fallback_cwd: str  # where ``cwd`` is not on this node
    output: str
    cores: list[int] | None
    user: Account | None  # None: the daemon's own
    passed_fds: tuple[int, ...]  # the task's own descriptors (an MPI task's PMI socket)
    umask: int = 0o022  # the submitter's
    error: str | None = None  # stderr's file, apart from ``output``
    truncate: bool = False  # the output files emptied first (else appended to)
    # its stdin, stdout and stderr as these descriptors (a step's pipes to its srun; ``output`` then ""),
    # else /dev/null and the output files
    stdio: tuple[int, int, int] | None = None
    # or all three a pseudo-terminal's slave, opened by this name in the task's new session: its controlling
    # terminal (srun --pty)
    terminal: str | None = None


class HeldTask:
    """A first process waiting at its gate: ``pid``, and ``status_fd`` to read why it could not start."""

    def __init__(self, pid: int, status_fd: int, gate_fd: int) -> None:
        self.pid, self.status_fd, self._gate_fd = pid, status_fd, gate_fd

    def open_gate(self) -> None:
        """Let it go on to become the task (it stays stopped if it was stopped)."""
        try:
            os.write(self._gate_fd, _GO)
        except BrokenPipeError:  # it died at the gate: its exit says so
            pass
        self._close_gate()

    def abandon(self) -> None:
        """Give up on it before the gate opens: it is killed and reaped, and nothing of it stays open."""
        self._close_gate()
        os.kill(self.pid, signal.SIGKILL)
        os.waitpid(self.pid, 0)
        os.close(self.status_fd)

    def _close_gate(self) -> None:
        if self._gate_fd >= 0:
            os.close(self._gate_fd)
            self._gate_fd = -1


def started_command(status_fd: int) -> bool:
    """Whether the first process whose status pipe this is exec'd the command (or died): the pipe's far
    end is closed."""
    return bool(select.select([status_fd], [], [], 0)[0])


@functools.cache
def setpriv() -> str:
    """util-linux's setpriv, which another user's task's start needs (a root node daemon looks for it as
    it starts, so that a node without it says so then, not when such a task comes)."""
    found = shutil.which("setpriv", path=os.pathsep.join([os.environ.get("PATH", os.defpath), "/usr/bin", "/bin"]))
    if found is None:
        raise MissingTool("setpriv (util-linux) is not installed: another user's task's start needs it")
    return found


def close_inherited_on_exec() -> None:
    """Mark every descriptor above the standard streams that this process was handed open across exec
    (a shell or a service manager may leave some): a spawned task must not inherit them. What the daemon
    opens itself is close-on-exec already (Python's descriptors, ZeroMQ's)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd > 2:
            try:
                os.set_inheritable(fd, False)
            except OSError:  # the listing's own descriptor, closed since
                pass


def environment_script(environment: dict[str, str]) -> bytes:
    """``environment`` as lines /bin/sh sources: ``export NAME='value'``, a value's quotes escaped, so that
    no value is ever more than text to the shell."""
    quoted = {name: value.replace("'", "'\\''") for name, value in environment.items() if _SHELL_NAME.fullmatch(name)}
    return "".join(f"export {name}='{value}'\n" for name, value in quoted.items()).encode()


def spawn_task(plan: StartPlan) -> HeldTask:
    """Spawn the task's first process; it waits at the gate until ``open_gate``."""
    if any(fd <= ENVIRONMENT_FD for fd in plan.passed_fds):
        raise ValueError(f"a task's own descriptors must be above {ENVIRONMENT_FD}: {plan.passed_fds}")
    become = [SHELL, "-c", _BECOME, "gangsched-task", str(os.getpid()), plan.cwd, plan.fallback_cwd, plan.output,
              plan.error or "", "truncate" if plan.truncate else "append"]
    if plan.user is None:
        argv = [*become, "wait", f"{plan.umask:03o}", *plan.argv]
    else:
        user = plan.user
        groups = ["--groups", ",".join(map(str, user.groups))] if user.groups else ["--clear-groups"]
        argv = [SHELL, "-c", _GATE, "gangsched-gate", setpriv(), f"--reuid={user.uid}", f"--regid={user.gid}",
                *groups, "--", *become, "go", f"{plan.umask:03o}", *plan.argv]
    gate_read, gate_write = _above_fixed(os.pipe2(os.O_CLOEXEC))
    status_read, status_write = _above_fixed(os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK))
    (environment,) = _above_fixed((_environment_file(plan),))
    try:
        actions = _standard_streams(plan)
        actions += [(os.POSIX_SPAWN_DUP2, gate_read, GATE_FD), (os.POSIX_SPAWN_DUP2, status_write, STATUS_FD),
                    (os.POSIX_SPAWN_DUP2, environment, ENVIRONMENT_FD)]
        actions += [(os.POSIX_SPAWN_DUP2, fd, fd) for fd in plan.passed_fds]  # the same number, kept across exec
        with _realtime_child() as scheduler:
            # the daemon's own user's task: its environment is this account's to give, so it comes with the
            # spawn, as the cheapest way (dash sourcing it was a twentieth of a task's CPU in a flood)
            pid = spawn(argv, plan.env if plan.user is None else {"PATH": SYSTEM_PATH}, actions, scheduler)
    except BaseException:
        for fd in (gate_read, gate_write, status_read, status_write, environment):
            os.close(fd)
        raise
    for fd in (gate_read, status_write, environment):
        os.close(fd)
    held = HeldTask(pid, status_read, gate_write)
    try:
        if scheduler is not None:  # normal priority before the gate opens
            os.sched_setscheduler(pid, os.SCHED_OTHER, os.sched_param(0))
        if plan.cores:
            os.sched_setaffinity(pid, plan.cores)  # inherited by what it execs and forks
    except BaseException:
        held.abandon()
        raise
    return held


def _standard_streams(plan: StartPlan) -> list[FileAction]:
    """The spawn's actions that give the task its stdin, stdout and stderr. A terminal is opened, not
    inherited: the spawn made the child a session leader first, and a session leader without a controlling
    terminal that opens one takes it as its own, its process group in the terminal's foreground."""
    if plan.terminal is not None:
        return [(os.POSIX_SPAWN_OPEN, 0, plan.terminal, os.O_RDWR, 0), (os.POSIX_SPAWN_DUP2, 0, 1),
                (os.POSIX_SPAWN_DUP2, 0, 2)]
    if plan.stdio is not None:
        return [(os.POSIX_SPAWN_DUP2, given, fd) for fd, given in enumerate(plan.stdio)]
    return [(os.POSIX_SPAWN_OPEN, fd, os.devnull, os.O_RDWR, 0) for fd in (0, 1, 2)]


@contextlib.contextmanager
def _realtime_child() -> Iterator[tuple[int, os.sched_param] | None]:
    """Within it, where this thread runs at real-time priority, a child it spawns starts at that priority,
    and the scheduling the spawn should give it until its exec: the lowest real-time priority. None
    elsewhere: the child starts at normal priority, as SCHED_RESET_ON_FORK gives every child.

    A spawn holds this thread until the child execs (vfork). A child at normal priority waits its turn
    behind the jobs' tasks, on a busy host for milliseconds (3.4 ms at the median with three busy tasks
    on the daemon's core), and the daemon applies no switch meanwhile (docs/limits.md, "The switch in
    the flood"). The kernel resets a child's policy as it forks it, before the child could raise it: so
    the reset is off for the spawn alone (the launch thread runs without it: noded/launch_thread.py). At
    priority 1 the child runs at once, below every daemon; the daemon puts it back to normal priority as
    soon as the spawn returns, before its gate opens, so no code of the user's runs at real-time
    priority."""
    if realtime_priority() is None:
        yield None
        return
    scheduler = os.SCHED_FIFO, os.sched_param(os.sched_get_priority_min(os.SCHED_FIFO))
    policy = os.sched_getscheduler(0)
    if not policy & os.SCHED_RESET_ON_FORK:
        yield scheduler
        return
    param = os.sched_getparam(0)
    os.sched_setscheduler(0, policy & ~os.SCHED_RESET_ON_FORK, param)
    try:
        yield scheduler
    finally:
        os.sched_setscheduler(0, policy, param)


def _environment_file(plan: StartPlan) -> int:
    """A memfd holding the task's environment as the shell sources it, readable by the task's user alone
    (it opens it again as /dev/fd/5, past its gate and its change of user)."""
    fd = os.memfd_create("gangsched-task-environment", os.MFD_CLOEXEC)
    try:
        if plan.user is not None:  # another user's: only past the change of user (the daemon's own: at the spawn)
            os.write(fd, environment_script(plan.env))
        if plan.user is not None:
            os.fchown(fd, plan.user.uid, plan.user.gid)
        os.fchmod(fd, 0o400)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _above_fixed(fds: tuple[int, ...]) -> tuple[int, ...]:
    """The descriptors moved above the numbers they are given in the child, so that no move overwrites
    another (a process that closed its standard streams gets descriptors from 0 up)."""
    moved = []
    for fd in fds:
        if fd <= ENVIRONMENT_FD:
            high = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, ENVIRONMENT_FD + 1)
            os.close(fd)
            fd = high
        moved.append(fd)
    return tuple(moved)
