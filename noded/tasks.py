"""One task of a job on this node: its process group, CPU clock and progress counter.

CPU time is read from the process's CPU clock (nanoseconds, about 1 µs a
read) rather than psutil's ``cpu_times()``, whose 10 ms ticks make a 100 ms
quantum's utilization wrong by up to 9 points (MEASUREMENTS.md §4). It counts
every thread of the task's leading process; processes the task forks are not
counted until the leader reaps them.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from gangsched.noded.pmi import LineReader
from gangsched.protocol.messages import MpiKind, TaskSpec

PROGRESS_BYTES = 8

# The kernel SIGKILLs the task when the daemon that started it dies, even kill -9'd
# and even while the task is stopped, so a dead node daemon leaves no task behind.
DIE_WITH_PARENT = ["setpriv", "--pdeathsig", "KILL", "--"]


def process_cpu_ns(pid: int) -> int:
    """The CPU time of process ``pid`` (all its threads), from its CPU clock."""
    return time.clock_gettime_ns(((~pid) << 3) | 2)  # CPUCLOCK_SCHED of the process


@dataclass
class Task:
    job_id: int
    rank: int
    process: subprocess.Popen[bytes]
    pidfd: int
    progress_path: Path
    progress_fd: int
    runnable: bool  # the state last applied by signals, not the desired one
    cpu_ns: int = 0  # CPU time at the last reading
    runnable_since_ns: int = 0  # when the current runnable stretch was last sampled
    kill_deadline: float | None = None  # monotonic seconds; SIGKILL the group then
    checkpointing: bool = False
    pmi: socket.socket | None = None  # the daemon's end of the task's PMI_FD
    pmi_lines: LineReader | None = None
    failure: str | None = None  # why the task failed, when it is not its exit status that says so

    @property
    def pid(self) -> int:
        return self.process.pid

    @property
    def leaving(self) -> bool:
        """Ending or migrating: it runs, whatever the switches say, until it exits."""
        return self.kill_deadline is not None or self.checkpointing

    def read_cpu_ns(self) -> int:
        """The task's CPU time now; the last reading once the process is gone."""
        try:
            self.cpu_ns = process_cpu_ns(self.pid)
        except OSError:
            pass
        return self.cpu_ns

    def take_cpu_ns(self) -> int:
        """CPU time used since the previous reading."""
        before = self.cpu_ns
        return self.read_cpu_ns() - before

    def read_progress(self) -> int:
        try:
            return int.from_bytes(os.pread(self.progress_fd, PROGRESS_BYTES, 0), "little")
        except OSError:
            return 0

    def stop(self) -> None:
        self._signal(signal.SIGSTOP)
        self.runnable = False

    def resume(self) -> None:
        self._signal(signal.SIGCONT)
        self.runnable = True

    def terminate(self, grace_s: float) -> None:
        """SIGTERM the group and let it run to handle it; SIGKILL once ``grace_s`` passed."""
        self._signal(signal.SIGTERM)
        self._signal(signal.SIGCONT)
        self.kill_deadline = time.monotonic() + grace_s

    def kill(self) -> None:
        self._signal(signal.SIGKILL)

    def checkpoint(self) -> None:
        """Ask the task (its leader only: a child would die of SIGUSR1) to save its state and exit."""
        try:
            os.kill(self.pid, signal.SIGUSR1)
        except ProcessLookupError:
            return
        self.checkpointing = True
        self.resume()

    def close_pmi(self) -> None:
        if self.pmi is not None:
            self.pmi.close()
            self.pmi = None

    def reap(self) -> int:
        """The exit status of a task whose pidfd became readable; the group goes with it."""
        self.kill()  # whatever the leader left behind in its group, stopped or not
        returncode = self.process.wait()
        self.close_pmi()
        os.close(self.pidfd)
        os.close(self.progress_fd)
        self.progress_path.unlink(missing_ok=True)
        return returncode

    def _signal(self, sig: signal.Signals) -> None:
        try:
            os.killpg(self.pid, sig)
        except ProcessLookupError:
            pass  # the group is gone; its pidfd will say so


def launch(
    spec: TaskSpec, node: str, spool: Path, runnable: bool, cpus: set[int] | None
) -> Task:
    """Start the task in a process group of its own, stopped unless ``runnable``.

    The daemon runs at real-time priority with SCHED_RESET_ON_FORK, so the
    kernel starts the task at normal priority. ``cpus`` pins it to its
    processor's cores; it is set before the task starts any thread, and its
    threads inherit it. An MPI task gets one end of a socket pair as PMI_FD.
    """
    stem = f"job-{spec.job_id}.{spec.rank}"
    progress_path = spool / f"{stem}.progress"
    progress_path.write_bytes(bytes(PROGRESS_BYTES))
    cwd = Path(spec.cwd) if spec.cwd and Path(spec.cwd).is_dir() else spool
    environment = _environment(spec, node, progress_path)
    _check_command(spec.argv[0], cwd, environment["PATH"])
    output = _output_path(spec, cwd, spool, stem)
    ours, theirs = socket.socketpair() if spec.mpi is MpiKind.PMI1 else (None, None)
    try:
        if theirs is not None:
            environment.update(PMI_FD=str(theirs.fileno()), PMI_RANK=str(spec.rank),
                               PMI_SIZE=str(spec.size), PMI_SPAWNED="0")
        with open(output, "ab") as log:
            process = subprocess.Popen(
                DIE_WITH_PARENT + spec.argv,
                cwd=cwd,
                env=environment,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                pass_fds=() if theirs is None else (theirs.fileno(),),
            )
    except BaseException:
        if ours is not None:
            ours.close()
        raise
    finally:
        if theirs is not None:
            theirs.close()
    if cpus is not None:
        os.sched_setaffinity(process.pid, cpus)
    if ours is not None:
        ours.setblocking(False)
    task = Task(
        job_id=spec.job_id,
        rank=spec.rank,
        process=process,
        pidfd=os.pidfd_open(process.pid),
        progress_path=progress_path,
        progress_fd=os.open(progress_path, os.O_RDONLY),
        runnable=True,
        pmi=ours,
        pmi_lines=None if ours is None else LineReader(),
    )
    if not runnable:
        task.stop()
    task.read_cpu_ns()
    task.runnable_since_ns = time.monotonic_ns()
    return task


def place_in_block(spec: TaskSpec) -> tuple[int, int, int]:
    """(which of the job's nodes this is, the rank among the job's ranks on it, how many there are)."""
    first = 0
    for index, count in enumerate(spec.block or [spec.size]):
        if spec.rank < first + count:
            return index, spec.rank - first, count
        first += count
    raise ValueError(f"rank {spec.rank} is beyond the job's layout {spec.block}")


def _check_command(command: str, cwd: Path, path: str) -> None:
    """Refuse a command that is not there, before the task is started."""
    found = os.access(cwd / command, os.X_OK) if "/" in command else shutil.which(command, path=path)
    if not found:
        raise FileNotFoundError(f"command not found on this node: {command}")


def _output_path(spec: TaskSpec, cwd: Path, spool: Path, stem: str) -> Path:
    if spec.output is None:
        return spool / f"{stem}.out"
    return cwd / spec.output.replace("%j", str(spec.job_id)).replace("%t", str(spec.rank))


def _environment(spec: TaskSpec, node: str, progress_path: Path) -> dict[str, str]:
    environment = dict(os.environ)
    # tasks find this installation's python and `gang` first
    environment["PATH"] = os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")])
    environment.update(spec.env)
    _, local_rank, local_size = place_in_block(spec)
    environment.update(
        GANG_JOB_ID=str(spec.job_id),
        GANG_RANK=str(spec.rank),
        GANG_SIZE=str(spec.size),
        GANG_NODE=node,
        GANG_BARRIER_ADDR=spec.barrier_addr,
        GANG_PROGRESS_FILE=str(progress_path),
        # what other launchers' programs read (torchrun's names)
        RANK=str(spec.rank),
        WORLD_SIZE=str(spec.size),
        LOCAL_RANK=str(local_rank),
        LOCAL_WORLD_SIZE=str(local_size),
    )
    if spec.rendezvous is not None:
        host, _, port = spec.rendezvous.rpartition(":")
        environment.update(MASTER_ADDR=host, MASTER_PORT=port)
    if spec.rank == 0:
        environment["GANG_BARRIER_BIND"] = spec.barrier_bind
    if spec.io_addr:
        environment["GANG_IO_ADDR"] = spec.io_addr
    if spec.checkpoint:
        environment["GANG_CHECKPOINT"] = spec.checkpoint
        Path(spec.checkpoint).parent.mkdir(parents=True, exist_ok=True)
    if spec.restore:
        environment["GANG_RESTORE"] = "1"
    return environment
