"""`gang submit`, as sbatch: options as flags or as a script's ``#GANG`` lines (flags win),
dependencies, arrays, and ``--wait`` / ``--follow`` for scripts that run a job and go on."""

import getpass
import json
import os
import shutil
import sys
import time
from pathlib import Path
from typing import Any

import click
from click.core import ParameterSource
from pydantic import ValidationError

from gangsched.cli import job_script
from gangsched.cli.click_job_options import job_options
from gangsched.cli.connect import with_master
from gangsched.cli.master_access import SUBMIT_RETRY_S
from gangsched.client.connection import submitter_umask
from gangsched.client.master_client import MasterClient
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.protocol.array_ranges import parse_array
from gangsched.protocol.dependency_text import NONE as NO_DEPENDENCY
from gangsched.protocol.dependency_text import read_dependency
from gangsched.protocol.messages import NodeList
from gangsched.protocol.output_pattern import expand
from gangsched.protocol.records import UNSERVED_HINTS, JobInfo, JobSpec, JobState, MpiKind

_POLL_S = 0.25
FOLLOW_OUTPUT = "gang-%j.%t.out"  # where --follow puts the output if --output does not say


@click.command(context_settings={"allow_interspersed_args": False})
@job_options
@click.option("-W", "--wait", is_flag=True,
              help="wait for the job to end and exit with its exit code (1 if it ended without one), like sbatch's")
@click.option("--follow", is_flag=True, help="wait, and print rank 0's output as it comes (it must be a file "
              "this machine sees: the local cluster, or a shared folder)")
@click.option("--json", "as_json", is_flag=True,
              help='print {"job_id": N, "job_ids": [...]} instead of a sentence (with --wait: also "state", '
              '"exit_code", "reason" and "jobs")')
@click.argument("command", nargs=-1)
@with_master
def submit(client: MasterClient, command: tuple[str, ...], **options: Any) -> None:
    """Submit a job: `gang submit -n 4 -- ./prog args`, `gang submit job.sh` (its #GANG lines
    are options) or `gang submit -n 4 --synthetic io`."""
    if options["mpi"] == "list":
        click.echo(mpi_served(client.node_list()))
        return
    if command and job_script.is_script(command[0]):
        options = _with_directives(click.get_current_context(), Path(command[0]), options)
        if not os.access(command[0], os.X_OK):
            raise click.UsageError(f"{command[0]} is not executable: chmod +x it")
        command = (os.path.abspath(command[0]), *command[1:])  # the tasks start in the job's folder
    if options["follow"] and (options["as_json"] or options["array"]):
        raise click.UsageError("--follow prints one job's output: not with --json or --array")
    cwd = job_folder(options, os.getcwd())
    if options["follow"] and options["output"] is None:
        options["output"] = FOLLOW_OUTPUT
    spec = _spec(client, command, options)
    try:
        array, limit = parse_array(options["array"]) if options["array"] else (None, None)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="-a/--array") from None
    job_ids = client.submit_jobs(spec, array, retry_s=SUBMIT_RETRY_S, array_limit=limit, hold=options["hold"])
    waits = options["wait"] or options["follow"]
    if not waits:
        if options["as_json"]:
            click.echo(json.dumps({"job_id": job_ids[0], "job_ids": job_ids}))
        else:
            click.echo(f"submitted job {_ids(job_ids)}")
        return
    if not options["as_json"]:
        click.echo(f"submitted job {_ids(job_ids)}, waiting for it to end", err=options["follow"])
    if options["follow"]:
        ended = [_follow(client, job_ids[0], _rank0_output(options["output"], job_ids[0], cwd))]
    else:
        ended = _wait(client, job_ids)
    worst = next((info for info in ended if info.state is not JobState.COMPLETED), ended[0])
    if options["as_json"]:
        click.echo(json.dumps({"job_id": job_ids[0], "job_ids": job_ids, **_outcome(worst),
                               "jobs": [{"job_id": info.job_id, **_outcome(info)} for info in ended]}))
    else:
        for info in ended:
            click.echo(f"job {info.job_id} {info.state.value}" + (f": {info.reason}" if info.reason else ""),
                       err=options["follow"])
    raise SystemExit(_exit_code(worst.state, worst.exit_code))


def mpi_served(listing: NodeList) -> str:
    """What ``--mpi list`` prints: each interface, on how many of the nodes, and the default."""
    lines = [f"{'MPI':<6} {'NODES':<7} NOTE"]
    nodes = listing.nodes
    for kind in MpiKind:
        serving = len(nodes) if kind is MpiKind.NONE else sum(kind in node.mpi for node in nodes)
        note = "the default (--mpi-default)" if kind is listing.mpi_default else ""
        if kind is not MpiKind.NONE and serving == 0 and nodes:
            note = UNSERVED_HINTS.get(kind, "no node serves it")
        lines.append(f"{kind.value:<6} {f'{serving}/{len(nodes)}':<7} {note}".rstrip())
    return "\n".join(lines)


def _with_directives(ctx: click.Context, script: Path, options: dict[str, Any]) -> dict[str, Any]:
    """The options of the script's #GANG lines where the command line gave none: flags win."""
    try:
        given = job_script.directives(script)
    except (OSError, ValueError) as error:
        raise click.UsageError(f"cannot read the #GANG lines: {error}") from None
    if not given:
        return options
    assert ctx.command is not None
    try:
        parsed = ctx.command.make_context(ctx.info_name, given, parent=ctx.parent)
    except click.UsageError as error:
        raise click.UsageError(f"{script}'s #GANG lines: {error.format_message()}") from None
    stray = [name for name in ("command", "master_endpoint", "keys") if parsed.params.get(name)]
    if stray:
        raise click.UsageError(f"{script}'s #GANG lines give job options only, not {stray[0]}")
    return {name: parsed.params[name]
            if ctx.get_parameter_source(name) is ParameterSource.DEFAULT
            and parsed.get_parameter_source(name) is ParameterSource.COMMANDLINE else value
            for name, value in options.items()}


def _spec(client: MasterClient, command: tuple[str, ...], options: dict[str, Any]) -> JobSpec:
    if command and client.endpoint.startswith("ipc://") and not shutil.which(command[0]):
        raise click.ClickException(f"command not found: {command[0]}")
    return job_spec(options, command, os.getcwd(), getpass.getuser(), submitter_umask())


def job_folder(options: dict[str, Any], here: str) -> str:
    """The tasks' working folder: ``--chdir``'s, else the folder the command runs in."""
    return os.path.abspath(options["chdir"]) if options["chdir"] else here


def job_spec(options: dict[str, Any], command: tuple[str, ...], here: str, user: str, umask: int) -> JobSpec:
    """The job the options (the one table's, cli/job_options.py, as click read them) and the command ask for,
    submitted from the folder ``here``."""
    synthetic = options["synthetic"]
    if bool(command) == bool(synthetic):
        raise click.UsageError("give either a command after -- (or a script) or --synthetic KIND")
    migratable = options["migratable"]
    if synthetic:
        program = SyntheticJob(
            synthetic, options["iterations"], options["compute_ms"], options["io_writes"],
            options["io_bytes"], options["wait_ms"], options["phases"], options["phase_iterations"],
            options["run_ms"],
        )
        argv, migratable = program.argv(), program.migratable
    else:
        argv = list(command)
    env = {}
    for export in options["exports"]:
        key, sep, value = export.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--export takes KEY=VALUE, not {export!r}")
        env[key] = value
    try:
        after = read_dependency(options["dependency"]) if options["dependency"] else NO_DEPENDENCY
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="-d/--dependency") from None
    nodes, tasks_per_node = options["nodes"], options["tasks_per_node"]
    try:
        return JobSpec(
            name=options["name"] or synthetic or os.path.basename(argv[0]),
            user=user,
            tasks=options["tasks"] or (nodes or 1) * (tasks_per_node or 1),
            nodes=nodes,
            tasks_per_node=tasks_per_node,
            cpus_per_task=options["cpus_per_task"] or 1,
            begin_time=options["begin"],
            mem_per_node=options["mem_per_node"],
            mem_per_cpu=options["mem_per_cpu"],
            mpi=MpiKind(options["mpi"]) if options["mpi"] else None,
            argv=argv,
            cwd=job_folder(options, here),
            env=env,
            exclusive=options["exclusive"],
            estimate_s=options["estimate"],
            priority=options["priority"],
            migratable=migratable,
            requeue=options["requeue"],
            output=options["output"],
            error=options["error"],
            **after,
            partition=options["partition"],
            reservation=options["reservation"],
            umask=umask,
        )
    except ValidationError as error:
        raise click.UsageError(error.errors()[0]["msg"].removeprefix("Value error, ")) from None


def _ids(job_ids: list[int]) -> str:
    return str(job_ids[0]) if len(job_ids) == 1 else f"{job_ids[0]} (array: jobs {job_ids[0]}-{job_ids[-1]})"


def _wait(client: MasterClient, job_ids: list[int]) -> list[JobInfo]:
    while True:
        ended = client.jobs(job_ids)
        if all(info.state.is_final for info in ended):
            return ended
        time.sleep(_POLL_S)


def _rank0_output(pattern: str, job_id: int, cwd: str) -> Path:
    return Path(cwd) / expand(pattern, {"j": job_id, "t": 0}, final=True)


def _follow(client: MasterClient, job_id: int, output: Path) -> JobInfo:
    """Wait for the job, copying what rank 0 writes to stdout as it comes."""
    offset = 0
    while True:
        info = client.job(job_id)  # before reading: once final, the file holds all there will be
        offset = _copy_new(output, offset)
        if info.state.is_final:
            break
        time.sleep(_POLL_S / 2)
    if offset == 0 and not output.exists():
        click.echo(f"rank 0's output {output} is not on this machine (the node's spool, or a folder "
                   "this machine does not share)", err=True)
    return info


def _copy_new(path: Path, offset: int) -> int:
    try:
        with path.open("rb") as file:
            file.seek(offset)
            new = file.read()
    except FileNotFoundError:
        return offset
    sys.stdout.buffer.write(new)
    sys.stdout.buffer.flush()
    return offset + len(new)


def _outcome(info: JobInfo) -> dict[str, Any]:
    return {"state": info.state.value, "exit_code": info.exit_code, "reason": info.reason}


def _exit_code(state: JobState, exit_code: int | None) -> int:
    """A shell's convention: the job's status, 128 + N for a signal N, 1 for an end without a status."""
    if state is JobState.COMPLETED:
        return 0
    if exit_code is None or exit_code == 0:
        return 1
    return 128 - exit_code if exit_code < 0 else exit_code
