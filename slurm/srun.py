"""Slurm's ``srun``: a step of the allocation it runs in (``SLURM_JOB_ID``, as a batch script's or salloc's
shell has it; the rest of Slurm's variables may be gone), or outside one, a job of its own whose step it
is. Either way the tasks' stdout and stderr come back to srun as they are written (``-l``: each line
after its task's rank), srun's standard input goes to task 0 (``-i none``: to none), SIGINT and SIGTERM
go on to the step's tasks (SIGINT twice within a second: SIGKILL, as Slurm's), and srun exits with the
step's exit status.

The tasks' streams come over ZeroMQ: srun binds a ROUTER, the master gives its address and a token srun
made to the step's nodes, and each node's daemon relays its tasks' pipes there (noded/stream_relay.py,
protocol/stream_frames.py). The step's tasks are the job's on their nodes: they run in its row of the
matrix and are frozen and thawed with it."""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field, replace

import zmq

from gangsched.cli.job_options import read_duration
from gangsched.client.connection import MasterConnection, RequestRefused, login_name
from gangsched.protocol.frames import pack
from gangsched.protocol.mpi_kinds import MpiKind
from gangsched.protocol.sizes import parse_size
from gangsched.protocol.stream_frames import CHUNK
from gangsched.slurm.command import SlurmError, master, options, run
from gangsched.slurm.getopt import Flag, table
from gangsched.slurm.step_shape import Shape, count_flag, inherited_count, step_slots
from gangsched.slurm.step_streams import Streams, own_address
from gangsched.slurm.terminal import UserTerminal
from gangsched.slurm.words import refusal, step_name, task_failures

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

USAGE = "[OPTIONS(0)...] executable [args...]"
FLAGS = table((
    (("-n", "--ntasks"), True, "tasks"), (("-N", "--nodes"), True, "nodes"),
    (("--ntasks-per-node",), True, "per_node"), (("-c", "--cpus-per-task"), True, "cpus_per_task"),
    (("-l", "--label"), False, "label"), (("-u", "--unbuffered"), False, "ignored"),
    (("-i", "--input"), True, "input"), (("-J", "--job-name"), True, "name"), (("--mpi",), True, "mpi"),
    (("--exact",), False, "ignored"), (("--overlap",), False, "ignored"), (("-t", "--time"), True, "time"),
    (("-p", "--partition"), True, "partition"), (("--mem",), True, "mem"), (("-D", "--chdir"), True, "chdir"),
    (("-K", "--kill-on-bad-exit"), False, "kill_on_bad_exit"), (("-v", "--verbose"), False, "ignored"),
    (("-Q", "--quiet"), False, "quiet"), (("-o", "--output"), True, "output"), (("-e", "--error"), True, "error"),
    (("-h", "--help"), False, "help"), (("-V", "--version"), False, "version"),
    (("-w", "--nodelist"), True, "nodelist"), (("-x", "--exclude"), True, "exclude"),
    (("--cpu-bind",), True, "ignored"),  # tasks are pinned to their processors' cores by the node
    (("--pty",), False, "pty"),
))
POLL_S = 0.2  # at most this long between srun's questions to the master: whether its step ended, its job runs


def pauses() -> Iterator[float]:
    """The waits between questions to the master: short at first (a step's end follows its streams' by a
    node's report, milliseconds), doubling up to ``POLL_S``."""
    pause = 0.005
    while True:
        yield pause
        pause = min(pause * 2, POLL_S)
PENDING_SAID_S = 1.0  # a job of its own still pending after this: srun says it waits, as Slurm's does


def _exit_status(code: int | None) -> int:
    if code is None:
        return 0
    return 128 - code if code < 0 else min(code, 255)


class Interrupts:
    """SIGINT and SIGTERM, for srun's loop to pass on to the step; SIGWINCH too where it has a terminal."""

    def __init__(self, window: bool = False) -> None:
        self.caught: list[int] = []
        self._last_interrupt = 0.0
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        signal.set_wakeup_fd(self._write)
        for number in (signal.SIGINT, signal.SIGTERM, *((signal.SIGWINCH,) if window else ())):
            signal.signal(number, self._caught)

    @property
    def fd(self) -> int:
        return self._read

    def _caught(self, number: int, frame: object) -> None:
        if number == signal.SIGINT:
            now = time.monotonic()
            if now - self._last_interrupt < 1.0:
                number = signal.SIGKILL
            self._last_interrupt = now
        self.caught.append(number)

    def drain(self) -> list[int]:
        try:
            while os.read(self._read, 512):
                pass
        except BlockingIOError:
            pass
        caught, self.caught = self.caught, []
        return caught


def relay(connection: MasterConnection, streams: Streams, job_id: int, step_id: int, user: str,
          ranks: int) -> None:
    """Until every task's streams ended: output out, input in, signals on to the step (a change of the
    terminal's size to its task's)."""
    interrupts = Interrupts(window=streams.has_terminal)
    poller = zmq.Poller()
    poller.register(streams.socket, zmq.POLLIN)
    poller.register(interrupts.fd, zmq.POLLIN)
    stdin = sys.stdin.fileno() if streams.input_open and not sys.stdin.closed else None
    pending_input: list[bytes] = []
    if stdin is not None:
        poller.register(stdin, zmq.POLLIN)
    while len(streams.ended) < ranks if ranks else not _over(connection, job_id, step_id):
        ready = dict(poller.poll(1000 if ranks else int(POLL_S * 1000)))  # no streams (-o): the master says its end
        if streams.socket in ready:
            streams.take()
        elif not ready and _over(connection, job_id, step_id):  # it ended without its streams: never started
            time.sleep(POLL_S)
            streams.take()
            return
        if interrupts.fd in ready:
            for number in interrupts.drain():
                if number == signal.SIGWINCH:
                    streams.send_size()
                    continue
                if number == signal.SIGKILL:
                    print("srun: forcing job termination", file=sys.stderr, flush=True)
                elif number == signal.SIGINT:
                    print("srun: interrupt (one more within 1 sec to abort)", file=sys.stderr, flush=True)
                _signal(connection, job_id, step_id, user, number)
        if stdin is not None and stdin in ready:
            try:
                data = os.read(stdin, CHUNK)
            except OSError:  # a terminal hung up: its input's end
                data = b""
            pending_input.append(data)
            if not data:
                poller.unregister(stdin)
                stdin = None
        while pending_input and streams.send_input(pending_input[0]):
            pending_input.pop(0)


def _over(connection: MasterConnection, job_id: int, step_id: int) -> bool:
    job, step = _step_of(connection, job_id, step_id)
    return job["state"] not in ("pending", "running", "suspended") or step.get("end_time") is not None


def _signal(connection: MasterConnection, job_id: int, step_id: int, user: str, number: int) -> None:
    try:
        connection.exchange(pack({"type": "signal_job", "job_id": job_id, "user": user, "signal": number,
                                  "step": step_id}))
    except RequestRefused:
        pass  # the step ended meanwhile


def _step_of(connection: MasterConnection, job_id: int, step_id: int) -> tuple[dict[str, Any], dict[str, Any]]:
    jobs = connection.job_maps([job_id])
    if not jobs:
        raise SlurmError(f"job {job_id} is gone")
    job = jobs[0]
    step = next((each for each in job.get("steps") or () if each["step_id"] == step_id), None)
    return job, step or {}


def _said_failures(step: dict[str, Any]) -> bool:
    """Each node's failed tasks said, as Slurm's srun says them; False if none failed."""
    lines = task_failures(step)
    for line in lines:
        print(f"srun: error: {line}", file=sys.stderr)
    return bool(lines)


def _unsaid(state: str, failures_said: bool) -> bool:
    """Whether an end in ``state`` needs a line of its own: a failure is said by its tasks' lines."""
    return state != "completed" and not (state == "failed" and failures_said)


def _finished(connection: MasterConnection, job_id: int, step_id: int, own_job: bool) -> int:
    """The step's exit status once the master has its end (its job's, for a job of srun's own)."""
    waits = pauses()
    while True:
        job, step = _step_of(connection, job_id, step_id)
        if own_job and job["state"] not in ("pending", "running", "suspended"):
            code = job.get("exit_code")
            if _unsaid(job["state"], _said_failures(step)):
                print(f"srun: error: job {job_id}: {job['state'].upper()}: {job.get('reason', '')}", file=sys.stderr)
            return _exit_status(code) or (0 if job["state"] == "completed" else 1)
        if not own_job and step.get("end_time") is not None:
            code, name = step.get("exit_code"), f"{job_id}.{step_name(job, step_id)}"
            if _unsaid(step["state"], _said_failures(step)):  # a node lost, its job's end, its time limit
                print(f"srun: error: step {name}: {step['state'].upper()}: {job.get('reason', '')}", file=sys.stderr)
            return _exit_status(code) or (0 if step["state"] == "completed" else 1)
        time.sleep(next(waits))


@dataclass
class Request:
    """What srun's command line asks: a command, and the shape of its step (or of its job's, outside one)."""

    command: list[str]
    given: dict[str, Any]
    shape: Shape
    grain: int | None  # -c
    input_rank: int | None
    user: str = field(default_factory=login_name)
    cwd: str = ""
    environment: dict[str, str] = field(default_factory=lambda: dict(os.environ))

    @classmethod
    def read(cls, arguments: list[str], name: str = "srun", flags: dict[str, Flag] = FLAGS, usage: str = USAGE,
             default_command: list[str] | None = None) -> Request:
        """srun's command line (or salloc's: ``name``, its ``flags`` and ``usage``, the command it runs where
        none is given)."""
        given, command = options(name, arguments, flags, usage, permute=False)
        command = command or default_command or []
        if not command:
            raise SlurmError("No command given to execute.")
        if given.get("mpi") not in (None, "list", *(kind.value for kind in MpiKind)):
            raise SlurmError(f"Invalid MPI type '{given['mpi']}', --mpi=list for acceptable types")
        if given.get("pty") and (given.get("input", "0") != "0" or "output" in given):
            raise SlurmError("--pty gives task 0 a terminal for its input and output: not with -i or -o")
        if "error" in given and "output" not in given:
            raise SlurmError("-e/--error without -o/--output is not supported by gangsched's srun yet "
                             "(docs/slurm.md)")
        text = given.get("input", "0")
        if text != "none" and not text.isdigit():
            raise SlurmError(f"--input={text}: gangsched's srun sends its input to one task (a number) or none")
        request = cls(command, given, Shape.of_flags(given), count_flag(given, "cpus_per_task", "--cpus-per-task"),
                      None if text == "none" or "output" in given else int(text))
        request.cwd = os.path.abspath(given["chdir"]) if "chdir" in given else os.getcwd()
        return request

    @property
    def total_tasks(self) -> int:
        """The tasks of a job of its own (outside an allocation)."""
        shape = self.shape
        return shape.tasks or (shape.nodes or 1) * (shape.per_node or 1)

    @property
    def kill_on_bad_exit(self) -> bool:
        return bool(self.given.get("kill_on_bad_exit"))

    @property
    def streamed(self) -> bool:
        """Whether the tasks' streams come to srun (not with -o: to their files)."""
        return "output" not in self.given

    def launch_fields(self, streams: Streams) -> dict[str, Any]:
        """What a step's (or srun's job's) spec says of where its streams go and how its tasks run."""
        return {"streams": streams.spec() if self.streamed else None, "output": self.given.get("output"),
                "error": self.given.get("error"), "kill_on_bad_exit": self.kill_on_bad_exit,
                "mpi": None if self.given.get("mpi") in (None, "list") else self.given["mpi"]}


def srun(arguments: list[str]) -> int:
    request = Request.read(arguments)
    if request.given.get("mpi") == "list":
        print("MPI plugin types are...\n" + "".join(f"\t{kind.value}\n" for kind in MpiKind), end="")
        return 0
    terminal = UserTerminal(sys.stdin.fileno()) if request.given.get("pty") and not sys.stdin.closed else None
    with master() as connection:
        streams = Streams(own_address(connection.endpoint.split(",")[0]), bool(request.given.get("label")),
                          request.input_rank, terminal)
        try:
            allocation = os.environ.get("SLURM_JOB_ID")
            if allocation is not None and allocation.isdigit():
                job_id, step_id, ranks = _start_step(connection, int(allocation), request, streams)
                own = False
            else:
                job_id, ranks = _start_job(connection, request, streams)
                step_id, own = 0, True
            with terminal or contextlib.nullcontext():
                relay(connection, streams, job_id, step_id, request.user, ranks)
        finally:
            streams.close()
        return _finished(connection, job_id, step_id, own)


def _start_step(connection: MasterConnection, job_id: int, request: Request,
                streams: Streams) -> tuple[int, int, int]:
    jobs = connection.job_maps([job_id], brief=True)
    if not jobs or jobs[0]["state"] != "running":
        raise SlurmError(f"Unable to confirm allocation for job {job_id}: Invalid job id specified\n"
                         f"srun: Check SLURM_JOB_ID environment variable. Expired or cancelled job?")
    environment = request.environment  # as Slurm's, the allocation's shape where the step gives none
    shape = request.shape
    slots, warnings = step_slots(jobs[0], replace(
        shape, tasks=shape.tasks or inherited_count(environment, "SLURM_NTASKS"),
        nodes=shape.nodes or inherited_count(environment, "SLURM_NNODES")))
    for warning in warnings:
        print(f"srun: Warning: {warning}", file=sys.stderr, flush=True)
    try:
        reply = connection.exchange(pack({"type": "start_step", "job_id": job_id, "user": request.user, "step": {
            "argv": request.command, "env": request.environment, "cwd": request.cwd, "slots": slots,
            **request.launch_fields(streams)}}))
    except RequestRefused as error:
        raise SlurmError(f"Unable to create step for job {job_id}: {refusal(error.code, error.reason)}") from None
    return job_id, reply["step_id"], len(slots) if request.streamed else 0


def _start_job(connection: MasterConnection, request: Request, streams: Streams) -> tuple[int, int]:
    job_id = allocate(connection, request, {"name": request.given.get("name") or os.path.basename(
        request.command[0]), "argv": request.command, **request.launch_fields(streams)}, "srun")
    return job_id, request.total_tasks if request.streamed else 0


def allocate(connection: MasterConnection, request: Request, fields: dict[str, Any], name: str) -> int:
    """Submit the job of srun's (or salloc's: ``name``) command line, its spec's ``fields`` given, and wait
    until it runs, saying so as Slurm's do where it waits: its id."""
    given, shape = request.given, request.shape
    if shape.required or shape.excluded:
        raise SlurmError(f"-w/--nodelist and -x/--exclude are not supported by gangsched's {name} outside an "
                         "allocation yet (docs/slurm.md)")
    try:
        limit = None if "time" not in given else read_duration(given["time"], None)
        memory = None if "mem" not in given else parse_size(given["mem"])
    except ValueError as error:
        raise SlurmError(str(error)) from None
    spec = {"user": request.user, "tasks": request.total_tasks, "nodes": shape.nodes,
            "tasks_per_node": shape.per_node, "cpus_per_task": request.grain or 1, "env": request.environment,
            "whole_environment": True, "cwd": request.cwd, "submit_dir": request.cwd,
            "submit_host": os.uname().nodename, "estimate_s": limit, "mem_per_node": memory,
            "partition": given.get("partition"), **fields}
    try:
        reply = connection.exchange(pack({"type": "submit", "spec": spec, "token": os.urandom(16).hex()}))
    except RequestRefused as error:
        raise SlurmError(f"Unable to allocate resources: {error}") from None
    job_id = int(reply["job_id"])
    said = False
    started = time.monotonic()
    waits = pauses()
    while True:
        (job,) = connection.job_maps([job_id], brief=True)
        if job["state"] != "pending":
            break
        if not said and time.monotonic() - started > PENDING_SAID_S and not given.get("quiet"):
            if name == "salloc":
                print(f"salloc: Pending job allocation {job_id}", file=sys.stderr, flush=True)
            print(f"{name}: job {job_id} queued and waiting for resources", file=sys.stderr, flush=True)
            said = True
        time.sleep(next(waits))
    if said:
        print(f"{name}: job {job_id} has been allocated resources", file=sys.stderr, flush=True)
    return job_id


def main(arguments: list[str] | None = None) -> None:
    run("srun", srun, arguments)


if __name__ == "__main__":
    main()
