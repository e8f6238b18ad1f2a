"""The first process of every task: forked by the node daemon, held at a gate, then it becomes the task.

A fresh interpreter per task (it was ``python -I -S`` running a launcher script)
cost about 20 ms of a core before the command ran: most of a short job's time
and the bound of the cluster's throughput. A fork of the daemon costs well
under a millisecond. The child runs none of the daemon's work: from the fork
to the exec it runs only the steps below, with the daemon's signal handling
undone first, so a signal meant for the task never reaches the daemon.

1. the daemon forks with every signal blocked; the child drops the daemon's
   signal handlers and wake-up socket, unblocks signals, starts a session
   of its own and waits at the gate;
2. meanwhile the daemon puts it in the task's cgroup (or process tree),
   stops it if the task's row is not the one running, and opens the gate, so
   no code of the user's runs outside the group or outside the task's slot;
3. past the gate, the child pins itself to the task's cores, takes the
   user's groups, gid and uid (where it is another user's task), asks the
   kernel to SIGKILL it when the daemon dies (after the change of user,
   which clears that wish) and gives up if the daemon is already gone;
4. enters the working folder and opens the output with the user's rights;
5. closes every descriptor but the task's own and execs the command, found
   on the task's PATH.

If a step fails, the child writes why to the status pipe and exits 127; the
daemon reads that when the task exits and fails the job with it. The status
pipe closes on exec, so the daemon reads nothing from a task that started.
"""

import ctypes
import os
import select
import signal
from dataclasses import dataclass

PR_SET_PDEATHSIG = 1
_GO = b"g"
_LIBC = ctypes.CDLL(None, use_errno=True)  # loaded before any fork: the child only calls it
_UNCATCHABLE = {signal.SIGKILL, signal.SIGSTOP}


@dataclass(frozen=True)
class Account:
    uid: int
    gid: int
    groups: list[int]


@dataclass(frozen=True)
class StartPlan:
    """What the child needs to become the task."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    fallback_cwd: str  # where ``cwd`` is not on this node
    output: str
    cores: list[int] | None
    user: Account | None  # None: the daemon's own
    passed_fds: tuple[int, ...]  # the task's own descriptors (an MPI task's PMI socket)


class HeldTask:
    """A forked child waiting at its gate: ``pid``, and ``status_fd`` to read why it could not start."""

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
    """Whether the first process whose status pipe this is exec'd (or died): the pipe's far end is closed."""
    return bool(select.select([status_fd], [], [], 0)[0])


def fork_task(plan: StartPlan) -> HeldTask:
    """Fork the task's first process; it waits at the gate until ``open_gate``."""
    gate_read, gate_write = os.pipe2(os.O_CLOEXEC)
    status_read, status_write = os.pipe2(os.O_CLOEXEC | os.O_NONBLOCK)
    # blocked across the fork: a signal in between would run the daemon's handler in the child
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        pid = os.fork()
        if pid == 0:
            _become(plan, gate_read, gate_write, status_write)  # never returns
    except BaseException:
        for fd in (gate_read, gate_write, status_read, status_write):
            os.close(fd)
        raise
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    os.close(gate_read)
    os.close(status_write)
    return HeldTask(pid, status_read, gate_write)


def _become(plan: StartPlan, gate_read: int, gate_write: int, status_write: int) -> None:
    try:
        os.close(gate_write)
        signal.set_wakeup_fd(-1)
        for sig in signal.valid_signals() - _UNCATCHABLE:
            try:
                signal.signal(sig, signal.SIG_DFL)  # the daemon's, and SIGPIPE, which Python ignores
            except (OSError, ValueError):  # real-time signals the C library keeps for itself
                pass
        signal.pthread_sigmask(signal.SIG_SETMASK, set())
        os.setsid()
        if os.read(gate_read, 1) != _GO:
            os._exit(127)  # the daemon gave up on it, or died
        os.close(gate_read)
        _start(plan, status_write)
    except BaseException as error:  # every failure is the task's reason not to start
        try:
            os.write(status_write, str(error).encode()[:4000])
        finally:
            os._exit(127)


def _start(plan: StartPlan, status_write: int) -> None:
    if plan.cores:
        os.sched_setaffinity(0, plan.cores)
    daemon = os.getppid()
    user = plan.user
    if user is not None:
        os.setgroups(user.groups)
        os.setresgid(user.gid, user.gid, user.gid)
        os.setresuid(user.uid, user.uid, user.uid)
    if _LIBC.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) != 0 or os.getppid() != daemon:
        raise RuntimeError("the node daemon is gone")
    try:
        os.chdir(plan.cwd)
    except OSError:
        os.chdir(plan.fallback_cwd)  # the folder the job was submitted from is not on this node
    try:
        output = os.open(plan.output, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o644)
    except OSError as error:
        raise RuntimeError(f"cannot open the output {plan.output}: {error.strerror}") from None
    nothing = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC)
    os.dup2(nothing, 0)
    os.dup2(output, 1)
    os.dup2(output, 2)
    kept = sorted({0, 1, 2, status_write, *plan.passed_fds})
    for low, high in zip(kept, [*kept[1:], os.sysconf("SC_OPEN_MAX")]):
        os.closerange(low + 1, high)
    for fd in plan.passed_fds:
        os.set_inheritable(fd, True)
    command = plan.argv[0]
    try:
        os.execvpe(command, plan.argv, plan.env)
    except FileNotFoundError:
        raise RuntimeError(f"command not found on this node: {command}") from None
    except OSError as error:
        raise RuntimeError(f"cannot run {command}: {error.strerror}") from None
