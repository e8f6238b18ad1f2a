"""One task of a job on this node: its processes, CPU clock and progress counter.

A task's first process is spawned by the daemon and held at a gate
(``noded/task_start.py``) while the daemon puts it in the task's group
(``noded/containment.py``); then it takes the user's identity and becomes the
command. Stopping, continuing and killing go to every process of the group.

CPU time is the group's where a cgroup counts it, else the first process's
CPU clock (nanoseconds, about 1 µs a read) rather than psutil's
``cpu_times()``, whose 10 ms ticks make a 100 ms quantum's utilization wrong
by up to 9 points; that clock counts every thread of the first process, and
processes it forks once it reaps them.
"""

import os
import pwd
import signal
import socket
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from gangsched.noded.containment import Containment
from gangsched.noded.memory import TaskMemory
from gangsched.noded.process_managers.wiring import TaskWiring
from gangsched.noded.stream_relay import StreamPipes, stream_pipes, terminal_pipes
from gangsched.noded.task_files import PROGRESS_BYTES, drop_stale_output, new_progress_file, user_folder, write_script
from gangsched.noded.task_groups import TaskGroup
from gangsched.noded.task_identity import place_in_block, task_account
from gangsched.noded.task_record import MemoryReading, TaskKey
from gangsched.noded.task_start import Account, HeldTask, StartPlan, spawn_task, started_command
from gangsched.noded.watchdog import SESSION_VARIABLE
from gangsched.protocol import task_environment
from gangsched.protocol.output_pattern import expand
from gangsched.protocol.records import MAX_PROGRESS, TaskSpec


class TaskFolders(NamedTuple):
    """Where a node's tasks keep their files (noded/settings.py)."""

    spool: Path  # the outputs of the daemon's own user's tasks
    user_spools: Path  # other users' outputs: DIR/NODE/USER/
    # progress files, each made and removed with its task (a tmpfs: a disk's file system, ext4 without a
    # journal most of all, pays for each file made); None: beside the outputs
    run: Path | None


def process_cpu_ns(pid: int) -> int:
    """The CPU time of process ``pid`` (all its threads), from its CPU clock."""
    return time.clock_gettime_ns(((~pid) << 3) | 2)  # CPUCLOCK_SCHED of the process


@dataclass
class Task:
    job_id: int
    step: int
    rank: int
    pid: int
    pidfd: int
    group: TaskGroup
    status_fd: int  # the reason its first process gives, where it could not start the command
    progress_path: Path
    progress_fd: int
    uid: int  # the user it runs as
    cpu_ns: int = 0  # CPU time at the last reading
    pmi: socket.socket | None = None  # the daemon's end of the task's PMI_FD
    schedstat_fd: int = -1  # /proc/PID/schedstat of its first process
    waited_ns: int = 0  # its run-queue wait at the last reading
    failure: str | None = None  # why the task failed, when it is not its exit status that says so
    memory: TaskMemory = field(default_factory=lambda: TaskMemory(None, 0, None))
    command_started: bool = False  # its first process passed its gate and exec'd (as last seen)
    progress: int = 0  # its progress counter at the last reading
    script_path: Path | None = None  # a batch step's script, written for it
    pipes: StreamPipes | None = None  # the daemon's ends of a step's streams, relayed to its srun

    def read_memory(self) -> MemoryReading:
        """Its peak so far, and whether it passed its limit."""
        if self.memory.folder is not None:
            return self.memory.read([])
        if not self.command_started:  # its first process, a copy of the daemon until it execs, is not counted
            self.command_started = started_command(self.status_fd)
        return self.memory.read([pid for pid in self.pids() if self.command_started or pid != self.pid])

    def pids(self) -> list[int]:
        return self.group.pids()

    def take_in_new_processes(self) -> bool:
        """Take in the processes the task started since the last look: the next signals reach them too.
        Whether there were any."""
        return self.group.take_in_new_processes()

    def read_cpu_ns(self) -> int:
        """The task's CPU time now; the last reading once it is gone."""
        try:
            counted = self.group.cpu_ns()
            self.cpu_ns = counted if counted is not None else process_cpu_ns(self.pid)
        except OSError:
            pass
        return self.cpu_ns

    def take_cpu_ns(self) -> int:
        """CPU time used since the previous reading."""
        before = self.cpu_ns
        return self.read_cpu_ns() - before

    def take_waited_ns(self) -> int:
        """How long its first process's main thread waited on a run queue for a core (another process held
        it) since the previous reading: time it wanted to run, which is not idleness."""
        try:
            waited = int(os.pread(self.schedstat_fd, 64, 0).split()[1])
        except (OSError, IndexError, ValueError):  # gone
            return 0
        taken, self.waited_ns = waited - self.waited_ns, waited
        return max(0, taken)

    def read_progress(self) -> int:
        """Its progress counter, as it wrote it; one beyond ``MAX_PROGRESS`` fails its job (``failure``, once),
        the last count it gave standing."""
        try:
            counted = int.from_bytes(os.pread(self.progress_fd, PROGRESS_BYTES, 0), "little")
        except OSError:
            return self.progress
        if counted > MAX_PROGRESS:
            if self.failure is None:
                self.failure = f"wrote {counted} to its progress counter ({task_environment.PROGRESS_FILE}): " \
                    f"a count is at most {MAX_PROGRESS}"
            return self.progress
        self.progress = counted
        return counted

    def stop(self) -> None:
        self.group.stop()

    def keep_stopped(self) -> None:
        """After a switch's stop: keep it stopped whatever signals it gets (noded/holding.py)."""
        self.group.keep_stopped()

    def escaped(self) -> bool:
        """Whether it ran while held (by process tree); it is stopped again if so."""
        return self.group.escaped()

    def resume(self) -> None:
        self.group.resume()

    def terminate(self) -> None:
        """SIGTERM every process and let them run to handle it (the node's core orders the kill)."""
        self.group.send(signal.SIGTERM)

    def kill(self) -> None:
        self.group.kill()

    def checkpoint(self) -> None:
        """Ask the task (its first process only: a child would die of SIGUSR1) to save its state and exit."""
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return
        self.resume()

    def deliver(self, signal_number: int, whole: bool) -> None:
        """A user's signal (scancel --signal): to every process of the task (``whole``), or to its first alone
        (a batch script's shell); a descheduled task takes it when it runs again."""
        if whole:
            self.group.deliver(signal.Signals(signal_number))
            return
        try:
            os.kill(self.pid, signal_number)
        except ProcessLookupError:
            pass

    def close_pmi(self) -> None:
        if self.pmi is not None:
            self.pmi.close()
            self.pmi = None

    def reap(self) -> int:
        """The exit status of a task whose pidfd became readable; every process of it goes too.

        Where its first process could not start the command, its reason becomes the task's failure.
        """
        self.kill()  # whatever the first process left behind, stopped or not
        returncode = os.waitstatus_to_exitcode(os.waitpid(self.pid, 0)[1])
        try:
            reason = os.read(self.status_fd, 4096).decode(errors="replace")
        except OSError:
            reason = ""
        if reason and self.failure is None:
            self.failure = f"could not start: {reason}"
        self.close_pmi()
        for fd in (self.pidfd, self.status_fd, self.progress_fd, self.schedstat_fd):
            os.close(fd)
        self.remove_files()
        return returncode

    def remove_files(self) -> None:
        """Its progress counter and a batch step's script, once it is gone."""
        self.progress_path.unlink(missing_ok=True)
        if self.script_path is not None:
            self.script_path.unlink(missing_ok=True)


class StartingTask:
    """A task whose first process waits at its gate, contained (``start``): ``go`` lets it run, or stops it
    first, then opens the gate. Apart so that a node daemon can start a task beside its switches and decide
    whether it runs with the last switch applied (noded/launch_thread.py)."""

    def __init__(self, task: Task, held: HeldTask) -> None:
        self.task, self._held = task, held

    def go(self, runnable: bool) -> Task:
        """The task, running or stopped (and held so) as ``runnable`` says, past its gate."""
        task = self.task
        if not runnable:
            try:
                task.stop()
                task.keep_stopped()
            except BaseException:
                self.abandon()
                raise
        self._held.open_gate()
        task.read_cpu_ns()
        task.take_waited_ns()
        return task

    def abandon(self) -> None:
        """Kill it at its gate and forget it, its groups released (where empty already)."""
        task = self.task
        self._held.abandon()
        task.close_pmi()
        if task.pipes is not None:
            task.pipes.close()
        for fd in (task.pidfd, task.progress_fd, task.schedstat_fd):
            os.close(fd)
        task.remove_files()
        task.group.release()
        task.memory.release()


def start(
    spec: TaskSpec, node: str, folders: TaskFolders, containment: Containment, cpus: set[int] | None,
    wiring: TaskWiring | None = None,
) -> StartingTask:
    """Start the task as its user where the daemon may change user, held at its gate in its group.

    The daemon runs at real-time priority with SCHED_RESET_ON_FORK, so the
    kernel starts the task at normal priority. An MPI task gets what its
    process manager prepared (``wiring``): variables, and one end of a socket
    pair as PMI_FD.
    """
    account = task_account(spec.user, node)
    folder = folders.spool if account is None else user_folder(folders.user_spools / node, account.pw_name, account)
    counters = folder if folders.run is None else \
        folders.run if account is None else user_folder(folders.run, account.pw_name, account)
    key = TaskKey.of(spec)
    stem = key.name
    progress_path = counters / f"{stem}.progress"
    progress_fd = new_progress_file(progress_path, account)
    if spec.checkpoint:  # CHECKPOINT_DIR/USER/job-J/rank-R: the user's folder is theirs alone
        user_folder(Path(spec.checkpoint).parents[2], spec.user, account)
    barrier_folder = Path(spec.barrier_bind.removeprefix("ipc://")).parent
    if spec.rank == 0 and spec.barrier_bind.startswith("ipc://") and barrier_folder.name == spec.user:
        user_folder(barrier_folder.parent, spec.user, account)  # PEER/USER/job-J.barrier, bound as the user
    place = place_in_block(spec)
    environment = _environment(spec, node, place, progress_path, containment.session, account)
    values = {"j": spec.job_id, "t": spec.rank, "N": node, "n": place[0]}
    output = str(folder / f"{stem}.out") if spec.output is None else expand(spec.output, values, final=True)
    if spec.output is None and account is not None:
        drop_stale_output(Path(output), account)
    argv = spec.argv
    script_path = None
    if spec.script is not None:  # a batch step: its script, where only its user may write it
        script_path = folder / f"{stem}.script"
        write_script(script_path, spec.script, account)
        argv = [str(script_path), *spec.argv[1:]]
    wiring = wiring or TaskWiring()
    ours, theirs = wiring.ours, wiring.passed
    pipes, stdio, terminal = _streams(spec, os.getuid() if account is None else account.pw_uid)
    environment.update(wiring.environment)
    group, memory = containment.groups(key, spec.memory_limit)
    group.job_control = terminal is not None
    user = None if account is None else \
        Account(account.pw_uid, account.pw_gid, os.getgrouplist(account.pw_name, account.pw_gid))
    plan = StartPlan(
        argv=argv, env=environment, cwd=spec.cwd or str(folder), fallback_cwd=str(folder),
        output=output if pipes is None else "", stdio=stdio,
        terminal=None if terminal is None else os.ttyname(terminal),
        cores=sorted(cpus) if cpus else None, user=user, passed_fds=() if theirs is None else (theirs.fileno(),),
        umask=spec.umask, error=spec.error and expand(spec.error, values, final=True),
        truncate=spec.open_mode == "truncate")
    try:
        held = spawn_task(plan)
        try:
            task = _hold(held, spec, group, memory, progress_path, progress_fd, account, ours)
            task.script_path, task.pipes = script_path, pipes
        except BaseException:
            held.abandon()
            raise
    except BaseException:
        if ours is not None:
            ours.close()
        if pipes is not None:
            pipes.close()
        os.close(progress_fd)
        progress_path.unlink(missing_ok=True)
        if script_path is not None:
            script_path.unlink(missing_ok=True)
        group.release()
        memory.release()
        raise
    finally:
        if theirs is not None:
            theirs.close()
        for fd in (*(stdio or ()), *(() if terminal is None else (terminal,))):
            os.close(fd)  # the task's ends: the task holds them now
    return StartingTask(task, held)


def _streams(spec: TaskSpec, uid: int) -> tuple[StreamPipes | None, tuple[int, int, int] | None, int | None]:
    """Where a step's task's streams go to its srun: the daemon's ends, and the task's (its stdin, stdout and
    stderr; or a terminal's slave, which it opens as its controlling terminal). None: to files."""
    if spec.streams is None:
        return None, None, None
    reads_input = spec.streams.input_rank == spec.rank
    if spec.streams.pty and reads_input:
        pipes, slave = terminal_pipes(uid)
        return pipes, None, slave
    return *stream_pipes(reads_input), None


def _hold(held: HeldTask, spec: TaskSpec, group: TaskGroup, memory: TaskMemory, progress_path: Path,
          progress_fd: int, account: pwd.struct_passwd | None, pmi: socket.socket | None) -> Task:
    """The task of a first process held at its gate, contained before it may exec."""
    group.adopt(held.pid)
    memory.join(held.pid)
    return Task(
        job_id=spec.job_id,
        step=spec.step,
        rank=spec.rank,
        pid=held.pid,
        pidfd=os.pidfd_open(held.pid),
        group=group,
        status_fd=held.status_fd,
        progress_path=progress_path,
        progress_fd=progress_fd,
        uid=os.getuid() if account is None else account.pw_uid,
        pmi=pmi,
        schedstat_fd=os.open(f"/proc/{held.pid}/schedstat", os.O_RDONLY),
        memory=memory,
    )


def _environment(
    spec: TaskSpec, node: str, place: tuple[int, int, int], progress_path: Path, session: str,
    account: pwd.struct_passwd | None,
) -> dict[str, str]:
    """``place``: the task's in its job's layout (``place_in_block``)."""
    if spec.whole_environment:  # the submitter's, which sbatch sent (its --export); a default PATH if none
        environment = {"PATH": os.defpath}
    else:  # the daemon's own user's tasks inherit its environment; another user's start clean
        environment = dict(os.environ) if account is None else \
            {name: os.environ[name] for name in ("LANG", "LC_ALL", "TZ") if name in os.environ}
        # tasks find this installation's python and `gang` first
        environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", os.defpath)])
    runs_as = account or (pwd.getpwuid(os.getuid()) if spec.whole_environment else None)
    if runs_as is not None:
        environment.update(HOME=runs_as.pw_dir, USER=runs_as.pw_name, LOGNAME=runs_as.pw_name,
                           SHELL=runs_as.pw_shell)
    environment.update(spec.env)
    uid, gid = (os.getuid(), os.getgid()) if account is None else (account.pw_uid, account.pw_gid)
    environment.update(SLURM_JOB_UID=str(uid), SLURM_JOB_GID=str(gid))
    _, local_rank, local_size = place
    environment.update({
        task_environment.JOB_ID: str(spec.job_id),
        task_environment.RANK: str(spec.rank),
        task_environment.STEP_ID: str(spec.step),
        task_environment.SIZE: str(spec.size),
        task_environment.NODE: node,
        task_environment.BARRIER_ADDR: spec.barrier_addr,
        task_environment.PROGRESS_FILE: str(progress_path),
    })
    environment.update(  # what other launchers' programs read (torchrun's names)
        RANK=str(spec.rank),
        WORLD_SIZE=str(spec.size),
        LOCAL_RANK=str(local_rank),
        LOCAL_WORLD_SIZE=str(local_size),
    )
    environment[SESSION_VARIABLE] = session
    if spec.rendezvous is not None:
        host, _, port = spec.rendezvous.rpartition(":")
        environment.update(MASTER_ADDR=host, MASTER_PORT=port)
    if spec.rank == 0:
        environment[task_environment.BARRIER_BIND] = spec.barrier_bind
    environment[task_environment.JOB_TOKEN] = spec.job_token
    if spec.io_addr:
        environment[task_environment.IO_ADDR] = spec.io_addr
    if spec.io_token:
        environment[task_environment.IO_TOKEN] = spec.io_token
    if spec.checkpoint:
        environment[task_environment.CHECKPOINT] = spec.checkpoint
    if spec.restore:
        environment[task_environment.RESTORE] = "1"
    return environment
