"""Slurm's ``salloc``: an allocation granted (``salloc: Granted job allocation N`` on stderr; ``salloc: Pending
job allocation N`` while it waits), then its command (the user's shell where none is given) run where salloc
runs, with the allocation's SLURM_* variables, so that ``srun`` in it starts steps; when the command ends the
allocation is released (``salloc: Relinquishing job allocation N``) and the job ends as the command did, its
exit code the job's and salloc's. ``--no-shell`` leaves the allocation until scancel or its time limit.

The allocation's step 0 only holds it: a placeholder on its first task (``extern``, as Slurm names the step
it keeps in an allocation), whose streams go to salloc as an srun step's do, so that the nodes end it (and
the job) if salloc is killed and cannot say so (noded/stream_relay.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

from gangsched.client.connection import MasterConnection, RequestRefused
from gangsched.protocol.frames import pack
from gangsched.slurm.command import master, run
from gangsched.slurm.getopt import table
from gangsched.slurm.srun import Request, allocate
from gangsched.slurm.step_streams import Streams, own_address

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

USAGE = "[OPTIONS(0)...] [command [args...]]"
FLAGS = table((
    (("-n", "--ntasks"), True, "tasks"), (("-N", "--nodes"), True, "nodes"),
    (("--ntasks-per-node",), True, "per_node"), (("-c", "--cpus-per-task"), True, "cpus_per_task"),
    (("-J", "--job-name"), True, "name"), (("-t", "--time"), True, "time"), (("-p", "--partition"), True, "partition"),
    (("--mem",), True, "mem"), (("-D", "--chdir"), True, "chdir"), (("-v", "--verbose"), False, "ignored"),
    (("-Q", "--quiet"), False, "quiet"), (("-h", "--help"), False, "help"), (("-V", "--version"), False, "version"),
    (("-w", "--nodelist"), True, "nodelist"), (("-x", "--exclude"), True, "exclude"),
    (("--no-shell",), False, "no_shell"),
))
HOLDER = ["sleep", "infinity"]  # step 0 of an allocation: it holds the first task until the job ends


def salloc(arguments: list[str]) -> int:
    request = Request.read(arguments, "salloc", FLAGS, USAGE, default_command=[os.environ.get("SHELL") or "/bin/sh"])
    no_shell = bool(request.given.get("no_shell"))
    name = request.given.get("name") or ("no-shell" if no_shell else "interactive")
    with master() as connection:
        streams = Streams(own_address(connection.endpoint.split(",")[0]), False, None)
        try:
            job_id = allocate(connection, request, {"name": name, "argv": HOLDER, "allocation": True,
                                                    "streams": None if no_shell else streams.spec()}, "salloc")
            print(f"salloc: Granted job allocation {job_id}", file=sys.stderr, flush=True)
            if no_shell:
                return 0
            returncode = _run(request, allocation_environment(connection, job_id, request.environment))
            print(f"salloc: Relinquishing job allocation {job_id}", file=sys.stderr, flush=True)
            try:
                connection.exchange(pack({"type": "cancel", "job_id": job_id, "user": request.user,
                                          "command_exit": max(returncode, -64)}))
            except RequestRefused:
                pass  # it ended meanwhile: its time limit, an scancel
        finally:
            streams.close()
    return 128 - returncode if returncode < 0 else returncode


def allocation_environment(connection: MasterConnection, job_id: int, environment: dict[str, str]) -> dict[str, str]:
    """``environment`` with the allocation's Slurm variables, as its tasks have them (the master's cluster name,
    its nodes and their processors)."""
    from gangsched.protocol.records import JobSpec
    from gangsched.protocol.slurm_environment import job_variables

    (job,) = connection.job_maps([job_id], brief=True)
    spec = JobSpec.model_validate(job["spec"])
    per_node: dict[str, int] = {}
    for node in job["node_names"]:
        per_node[node] = per_node.get(node, 0) + 1
    cluster = str(connection.node_list_map().get("cluster", "gangsched"))
    return {**environment, **job_variables(job_id, spec, list(per_node), list(per_node.values()),
                                           spec.partition or "", cluster, int(job.get("requeues", 0)))}


def _run(request: Request, environment: dict[str, str]) -> int:
    """The command, where salloc runs, until it ends: its return code (a signal's negative). SIGINT is the
    command's (it shares the terminal), not salloc's; SIGTERM or SIGHUP to salloc end the command, and then the
    allocation; salloc killed, the command gets SIGHUP (util-linux's setpriv asks the kernel), as from a
    terminal closed, and is not left behind."""
    command = subprocess.Popen(["setpriv", "--pdeathsig", "HUP", "--", *request.command], env=environment,
                               cwd=request.cwd)

    def end_command(number: int, frame: Any) -> None:
        command.send_signal(signal.SIGHUP)

    signal.signal(signal.SIGINT, lambda number, frame: None)  # not SIG_IGN: the command would inherit it
    for number in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(number, end_command)
    return command.wait()


def main(arguments: list[str] | None = None) -> None:
    run("salloc", salloc, arguments)


if __name__ == "__main__":
    main()
