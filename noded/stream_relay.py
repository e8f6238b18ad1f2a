"""A step's standard streams between its tasks and the srun that started it (``StepStreams``).

A task of such a step starts with pipes for stdin, stdout and stderr (``stream_pipes``; stdin /dev/null
but for the task that reads srun's input); the daemon keeps the other ends. The relay reads the tasks'
output as it comes, in the daemon's poll, and sends it to srun over a DEALER per step (ZeroMQ connects
in the background: an srun far away or gone never holds the loop), and writes what srun sends for the
input to the task that reads it. Neither side is ever read or written blocking: where srun takes
nothing more (its queue is full) the relay stops reading that task's pipes until it does, so the task
waits on its pipe as it would on a slow terminal, and nothing is dropped; input a task does not read
yet (it may be frozen with its row) waits in the relay. A stream's end is said once all of its
writers closed it (the task and everything it started), then the pipe is closed. An srun out of reach
for ``SRUN_GONE_S`` (killed: its kernel closed its socket) gives up its step: the relay lets it go, and
the daemon ends the step's tasks here (``NodeCore.srun_gone``).

A step on a pseudo-terminal (srun --pty) gives its input task one: the task opens its slave as its
controlling terminal (``terminal_pipes``), and the relay reads and writes the master, through two
descriptors of it so that each is polled for one thing, and sets its window's size as srun says. The
terminal's line discipline does the rest, as over ssh: echo, ^C as SIGINT to the foreground process
group, the SIGHUP when the daemon closes the master.

The frames are protocol/stream_frames.py's."""

import errno
import fcntl
import grp
import logging
import os
import termios
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial

import zmq
from zmq.utils.monitor import recv_monitor_message

from gangsched.noded.task_record import TaskKey
from gangsched.protocol.records import StepStreams, TaskSpec
from gangsched.protocol.stream_frames import (
    CHUNK,
    ERR,
    ERR_END,
    FROM_SRUN,
    HELLO,
    IN_END,
    OUT,
    OUT_END,
    WINCH,
    WINSIZE_BYTES,
)

log = logging.getLogger("gangsched.noded")
_QUEUED = 1000  # frames a step's srun may be behind by before the relay stops reading its tasks' output
# how long a step's srun may be out of reach before the step is ended. ZeroMQ drops a connection only when
# its peer's socket is gone (the process ended: its kernel closed it) or TCP's keepalive gave up, not on a
# slow network, and reconnects within a fraction of a second to an srun still there
SRUN_GONE_S = 5.0
_MONITORED = zmq.EVENT_HANDSHAKE_SUCCEEDED | zmq.EVENT_DISCONNECTED


@dataclass
class StreamPipes:
    """The daemon's ends of a task's streams: stdout's and stderr's reading ends, stdin's writing end (None:
    the task reads /dev/null). A terminal's: its master read as ``out``, written as ``input``, no ``err``."""

    out: int
    err: int
    input: int | None
    terminal: bool = False

    def close(self) -> None:
        for fd in (self.out, self.err, self.input):
            if fd is not None and fd >= 0:
                os.close(fd)
        self.out, self.err, self.input = -1, -1, None


def stream_pipes(reads_input: bool) -> tuple[StreamPipes, tuple[int, int, int]]:
    """The pipes of a task's streams: the daemon's ends (non-blocking, close-on-exec), and the task's stdin,
    stdout and stderr (an input pipe's end, or /dev/null)."""
    made: list[int] = []
    in_write: int | None
    try:
        out_read, out_write = _pipe(made)
        err_read, err_write = _pipe(made)
        if reads_input:
            in_read, in_write = _pipe(made)
        else:
            in_read, in_write = os.open(os.devnull, os.O_RDONLY | os.O_CLOEXEC), None
            made.append(in_read)
    except BaseException:
        for fd in made:
            os.close(fd)
        raise
    for ours in (out_read, err_read, in_write):
        if ours is not None:
            os.set_blocking(ours, False)
    return StreamPipes(out_read, err_read, in_write), (in_read, out_write, err_write)


def terminal_pipes(uid: int) -> tuple[StreamPipes, int]:
    """A pseudo-terminal for a task of user ``uid``: the daemon's ends (non-blocking, close-on-exec), and its
    slave's descriptor, to be held open until the task opened it by its name (``os.ttyname``) as its
    controlling terminal. The slave is the user's, as a login's terminal is (group tty, mode 620)."""
    master, slave = os.openpty()
    try:
        os.fchown(slave, uid, _tty_group())
        os.fchmod(slave, 0o620)
        writer = fcntl.fcntl(master, fcntl.F_DUPFD_CLOEXEC, 0)
    except BaseException:
        os.close(master)
        os.close(slave)
        raise
    for ours in (master, writer):
        os.set_blocking(ours, False)
    return StreamPipes(master, -1, writer, terminal=True), slave


def _tty_group() -> int:
    try:
        return grp.getgrnam("tty").gr_gid
    except KeyError:
        return -1  # the slave's group stays as it is


def _pipe(made: list[int]) -> tuple[int, int]:
    read, write = os.pipe2(os.O_CLOEXEC)
    made += [read, write]
    return read, write


@dataclass
class _Task:
    key: TaskKey
    rank: bytes
    pipes: StreamPipes
    pending_input: deque[bytes] = field(default_factory=deque)
    input_ended: bool = False


@dataclass
class _Step:
    socket: zmq.Socket[bytes]
    monitor: zmq.Socket[bytes]  # the socket's connection events
    token: bytes
    tasks: dict[int, _Task] = field(default_factory=dict)  # rank -> its task on this node
    held: list[bytes] | None = None  # a frame its srun did not take yet: no pipe of it is read until it does
    unreached_since: float | None = None  # monotonic: since when its srun is out of reach (None: reached)


class StreamRelay:
    def __init__(self, context: zmq.Context[zmq.Socket[bytes]], poller: zmq.Poller) -> None:
        self._context, self._poller = context, poller
        self._steps: dict[tuple[int, int, str], _Step] = {}  # (job, step, srun's address) -> its relay
        self._readers: dict[int, tuple[_Step, _Task, bytes]] = {}  # fd -> what it carries (OUT or ERR)
        self._writers: dict[int, tuple[_Step, _Task]] = {}  # an input pipe with input waiting -> its task

    def attach(self, spec: TaskSpec, streams: StepStreams, pipes: StreamPipes) -> None:
        """A task of a step whose streams go to its srun started: its output is relayed from now on."""
        where = (spec.job_id, spec.step, streams.address)
        step = self._steps.get(where)
        if step is None:
            socket = self._context.socket(zmq.DEALER)
            socket.setsockopt(zmq.LINGER, 1000)
            socket.setsockopt(zmq.SNDHWM, _QUEUED)
            socket.setsockopt(zmq.IMMEDIATE, 0)
            for option, value in ((zmq.TCP_KEEPALIVE, 1), (zmq.TCP_KEEPALIVE_IDLE, 30), (zmq.TCP_KEEPALIVE_INTVL, 10),
                                  (zmq.TCP_KEEPALIVE_CNT, 3)):  # a host gone, not a process stopped (^Z)
                socket.setsockopt(option, value)
            monitor = socket.get_monitor_socket(_MONITORED)
            socket.connect(streams.address)
            self._poller.register(socket, zmq.POLLIN)
            self._poller.register(monitor, zmq.POLLIN)
            step = self._steps[where] = _Step(socket, monitor, streams.token.encode(),
                                              unreached_since=time.monotonic())
        task = _Task(TaskKey.of(spec), str(spec.rank).encode(), pipes)
        step.tasks[spec.rank] = task
        self._send(step, HELLO, task.rank, b"")
        if pipes.terminal:  # its stderr is its stdout
            self._send(step, ERR_END, task.rank, b"")
        for fd, kind in ((pipes.out, OUT), (pipes.err, ERR)):
            if fd < 0:
                continue
            self._readers[fd] = (step, task, kind)
            if step.held is None:
                self._poller.register(fd, zmq.POLLIN)

    def handlers(self, ready: dict[object, int]) -> list[tuple[str, Callable[[], None]]]:
        """What the poll found for the relay: (what, handler) pairs for the loop to call."""
        found: list[tuple[str, Callable[[], None]]] = []
        for item in ready:
            if isinstance(item, int) and item in self._readers:
                found.append(("a step's output", partial(self._read, item)))
            elif isinstance(item, int) and item in self._writers:
                found.append(("a step's input", partial(self._write, item)))
            elif isinstance(item, zmq.Socket) and any(step.socket is item for step in self._steps.values()):
                found.append(("srun's messages", partial(self._from_srun, item, ready[item])))
            elif isinstance(item, zmq.Socket) and any(step.monitor is item for step in self._steps.values()):
                found.append(("the connection to a step's srun", partial(self._connection_event, item)))
        return found

    def _connection_event(self, monitor: zmq.Socket[bytes]) -> None:
        step = next(step for step in self._steps.values() if step.monitor is monitor)
        while True:
            try:
                event = recv_monitor_message(monitor, zmq.NOBLOCK)
            except zmq.Again:
                return
            if event["event"] == zmq.EVENT_HANDSHAKE_SUCCEEDED:
                step.unreached_since = None
            elif event["event"] == zmq.EVENT_DISCONNECTED and step.unreached_since is None:
                step.unreached_since = time.monotonic()

    def gone(self, now: float) -> list[tuple[int, int]]:
        """The steps (job, step) whose srun has been out of reach for ``SRUN_GONE_S``: their relays are closed
        (the tasks' pipes with them), and the daemon is to end their tasks here."""
        found = []
        for (job_id, step_id, _), step in list(self._steps.items()):
            if step.unreached_since is not None and now - step.unreached_since >= SRUN_GONE_S:
                log.warning("job %d step %d: its srun is out of reach: the step ends", job_id, step_id)
                for task in step.tasks.values():
                    for fd in (task.pipes.out, task.pipes.err, task.pipes.input):
                        self._forget(fd)
                    task.pipes.close()
                step.tasks.clear()
                self._close_step(step, linger=0)
                found.append((job_id, step_id))
        return found

    def _forget(self, fd: int | None) -> None:
        if fd is None or fd < 0:
            return
        if self._readers.pop(fd, None) is not None or self._writers.pop(fd, None) is not None:
            try:
                self._poller.unregister(fd)
            except KeyError:  # a step held back: its pipes were not in the poll
                pass

    def _send(self, step: _Step, kind: bytes, rank: bytes, data: bytes) -> bool:
        try:
            step.socket.send_multipart([step.token, kind, rank, data], zmq.NOBLOCK)
        except zmq.Again:
            return False
        return True

    def _read(self, fd: int) -> None:
        step, task, kind = self._readers[fd]
        try:
            data = os.read(fd, CHUNK)
        except BlockingIOError:
            return
        except OSError as error:  # a terminal whose slave every process closed: its end
            if not (task.pipes.terminal and error.errno == errno.EIO):
                raise
            data = b""
        if data:
            if not self._send(step, kind, task.rank, data):
                self._hold_back(step, [step.token, kind, task.rank, data])
            return
        self._poller.unregister(fd)
        del self._readers[fd]
        os.close(fd)
        end = OUT_END if kind == OUT else ERR_END
        if not self._send(step, end, task.rank, b""):
            self._hold_back(step, [step.token, end, task.rank, b""])
        if kind == OUT:
            task.pipes.out = -1
        else:
            task.pipes.err = -1
        if task.pipes.out < 0 and task.pipes.err < 0:
            self._task_done(step, task)

    def _hold_back(self, step: _Step, frame: list[bytes]) -> None:
        """srun takes nothing more now: the frame goes when it does (the socket's POLLOUT says when), and no
        pipe of the step is read until then: its tasks wait on their pipes."""
        step.held = frame
        for fd, (owner, _, _) in self._readers.items():
            if owner is step:
                self._poller.unregister(fd)
        self._poller.modify(step.socket, zmq.POLLIN | zmq.POLLOUT)

    def _go_on(self, step: _Step) -> None:
        """srun takes frames again: the one held goes, and the step's pipes are read again."""
        assert step.held is not None
        try:
            step.socket.send_multipart(step.held, zmq.NOBLOCK)
        except zmq.Again:
            return
        step.held = None
        self._poller.modify(step.socket, zmq.POLLIN)
        for fd, (owner, _, _) in self._readers.items():
            if owner is step:
                self._poller.register(fd, zmq.POLLIN)
        if not step.tasks:
            self._close_step(step)

    def _from_srun(self, socket: zmq.Socket[bytes], events: int) -> None:
        step = next(step for step in self._steps.values() if step.socket is socket)
        if step.held is not None and events & zmq.POLLOUT:
            self._go_on(step)
        while events & zmq.POLLIN and not socket.closed:
            try:
                frames = socket.recv_multipart(zmq.NOBLOCK)
            except zmq.Again:
                return
            if len(frames) != 3 or frames[0] not in FROM_SRUN or not frames[1].isdigit():
                continue
            task = step.tasks.get(int(frames[1]))
            if task is not None and frames[0] == WINCH:
                if task.pipes.terminal and task.pipes.out >= 0 and len(frames[2]) == WINSIZE_BYTES:
                    fcntl.ioctl(task.pipes.out, termios.TIOCSWINSZ, frames[2])  # SIGWINCH to its foreground
                continue
            if task is None or task.pipes.input is None or task.input_ended:
                continue
            if frames[0] == IN_END:
                task.input_ended = True
            else:
                task.pending_input.append(frames[2])
            self._write(task.pipes.input, step, task)

    def _write(self, fd: int, step: _Step | None = None, task: _Task | None = None) -> None:
        if step is None or task is None:
            step, task = self._writers[fd]
        while task.pending_input:
            chunk = task.pending_input[0]
            try:
                written = os.write(fd, chunk)
            except BlockingIOError:
                break
            except OSError as error:  # the task closed its input, or ended (a terminal: EIO)
                if error.errno != errno.EPIPE and not (task.pipes.terminal and error.errno == errno.EIO):
                    raise
                task.pending_input.clear()
                task.input_ended = True
                break
            if written < len(chunk):
                task.pending_input[0] = chunk[written:]
            else:
                task.pending_input.popleft()
        if task.pending_input and fd not in self._writers:
            self._writers[fd] = (step, task)
            self._poller.register(fd, zmq.POLLOUT)
        elif not task.pending_input:
            if fd in self._writers:
                del self._writers[fd]
                self._poller.unregister(fd)
            if task.input_ended:
                os.close(fd)
                task.pipes.input = None

    def _task_done(self, step: _Step, task: _Task) -> None:
        """Both output streams of a task ended: its input goes, and the step's socket once no task is left."""
        if task.pipes.input is not None:
            if task.pipes.input in self._writers:
                del self._writers[task.pipes.input]
                self._poller.unregister(task.pipes.input)
            os.close(task.pipes.input)
            task.pipes.input = None
        del step.tasks[int(task.rank)]
        if not step.tasks and step.held is None:
            self._close_step(step)

    def _close_step(self, step: _Step, linger: int | None = None) -> None:
        """Its sockets closed: its own lingers to send what it still holds, unless ``linger`` says."""
        where = next(where for where, each in self._steps.items() if each is step)
        del self._steps[where]
        self._poller.unregister(step.socket)
        self._poller.unregister(step.monitor)
        step.socket.disable_monitor()
        step.monitor.close(linger=0)
        step.socket.close(linger)

    def close(self) -> None:
        for step in self._steps.values():
            for task in step.tasks.values():
                task.pipes.close()
            step.monitor.close(linger=0)
            step.socket.close(linger=0)
        self._steps.clear()
        self._readers.clear()
        self._writers.clear()
