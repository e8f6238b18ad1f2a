"""The job commands, mirroring Slurm's: `submit` (sbatch), `queue` (squeue), `cancel`
(scancel), `nodes` (sinfo), and `matrix` for the Ousterhout matrix.

They reach the master given by ``--master``, else GANG_MASTER, else the local
cluster started by `gang cluster up`.
"""

import functools
import getpass
import json
import os
import shutil
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click
from pydantic import ValidationError
from rich.console import Console
from rich.live import Live

from gangsched.cli import columns, views
from gangsched.daemon.curve import CurveError
from gangsched.deploy.home import cluster_master
from gangsched.daemon.endpoints import MASTER_SOCKET, default_endpoint
from gangsched.jobs.synthetic import KINDS, SyntheticJob
from gangsched.master.client import MasterClient, MasterUnreachable, RequestRefused
from gangsched.protocol.messages import JobSpec, JobState, MpiKind

console = Console()
# long enough for a master to restart: its tries carry one token, so a retry never makes a second job
SUBMIT_RETRY_S = 30.0
_WAIT_POLL_S = 0.25


def _master(explicit: str | None, keys: Path | None) -> tuple[str, Path | None]:
    """The master to talk to, and the CURVE keys to talk with."""
    keys = keys or (Path(os.environ["GANG_KEYS"]) if os.environ.get("GANG_KEYS") else None)
    if explicit:
        return explicit, keys
    if os.environ.get("GANG_MASTER"):
        return os.environ["GANG_MASTER"], keys
    cluster = cluster_master()
    if cluster is not None:
        return cluster.endpoint, keys or cluster.keys
    if Path(default_endpoint(MASTER_SOCKET).removeprefix("ipc://")).is_socket():
        return default_endpoint(MASTER_SOCKET), keys  # a `gang master` of this account's, with its defaults
    raise click.ClickException(
        "no master: start one with `gang cluster up [--docker]` or `gang master`, or give --master / GANG_MASTER"
    )


def with_master(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give the command a connected client; turn the master's refusals into one-line errors."""

    @click.option("--master", "master_endpoint", default=None, help="the master's endpoint")
    @click.option("--keys", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="CURVE key folder (gang keygen) [$GANG_KEYS]")
    @functools.wraps(command)
    def wrapper(master_endpoint: str | None, keys: Path | None, **kwargs: Any) -> Any:
        try:
            endpoint, key_folder = _master(master_endpoint, keys)
            with MasterClient(endpoint, keys=key_folder) as client:
                return command(client, **kwargs)
        except (MasterUnreachable, RequestRefused, CurveError) as error:
            if kwargs.get("as_json"):
                code = error.code.value if isinstance(error, RequestRefused) else type(error).__name__
                _json_error(str(error), code)
            raise click.ClickException(str(error)) from None

    return wrapper


def _json_error(reason: str, code: str) -> None:
    """With --json, a script reads the error as it reads the answer: JSON, on stderr, and exit status 1."""
    click.echo(json.dumps({"error": reason, "code": code}), err=True)
    raise SystemExit(1)


@click.command(context_settings={"allow_interspersed_args": False})
@click.option("-n", "--ntasks", "tasks", type=click.IntRange(min=1), default=None,
              help="tasks, one per processor [-N x --ntasks-per-node, or -N, or 1]")
@click.option("-N", "--nodes", type=click.IntRange(min=1), default=None,
              help="spread the tasks over exactly this many nodes [as few as they fit on]")
@click.option("--ntasks-per-node", "tasks_per_node", type=click.IntRange(min=1), default=None,
              help="at most this many tasks on each node")
@click.option("--mpi", type=click.Choice([kind.value for kind in MpiKind]), default=MpiKind.NONE.value,
              show_default=True, help="pmi1: serve each task the simple PMI-1 wire protocol (MPICH, mpi4py)")
@click.option("--name", default=None, help="job name [the command's name]")
@click.option("--exclusive", is_flag=True, help="never share a quantum with another slot")
@click.option("-t", "--estimate", type=click.FloatRange(min=0, min_open=True), default=None,
              help="estimated run time in seconds, and its time limit: past it the job ends as TIMEOUT "
              "[the master's --default-estimate-s]")
@click.option("--priority", type=click.FloatRange(0, 1), default=0.0, show_default=True,
              help="your priority for this job (slack-based backfilling's UP)")
@click.option("--migratable", is_flag=True,
              help="the command checkpoints at barriers (jobs/runtime.py on_checkpoint); synthetic jobs always do")
@click.option("--requeue", is_flag=True, help="back to the queue if a node of the job is lost")
@click.option("--output", default=None, help="stdout+stderr file per task, %j job, %t rank "
              "[the node's spool folder]")
@click.option("--export", "exports", multiple=True, metavar="KEY=VALUE", help="set in the tasks' environment")
@click.option("--synthetic", type=click.Choice(KINDS), default=None,
              help="run the papers' synthetic program instead of a command")
@click.option("--iterations", type=int, default=250, show_default=True, help="synthetic: barriers; 0 = forever")
@click.option("--compute-ms", type=float, default=10.0, show_default=True, help="synthetic: CPU ms per iteration")
@click.option("--io-writes", type=int, default=20, show_default=True, help="synthetic: writes per iteration")
@click.option("--io-bytes", type=int, default=8193, show_default=True, help="synthetic: bytes per write")
@click.option("--wait-ms", type=float, default=0.0, show_default=True,
              help="synthetic: blocking wait per iteration")
@click.option("--phases", type=int, default=12, show_default=True, help="phased: compute phases")
@click.option("--phase-iterations", type=int, default=20, show_default=True,
              help="phased: iterations of a compute phase")
@click.option("--run-ms", type=float, default=100.0, show_default=True,
              help="timed: runnable ms per iteration")
@click.option("-D", "--chdir", type=click.Path(file_okay=False), default=None,
              help="the tasks' working folder (on the nodes) [the current folder]")
@click.option("-W", "--wait", is_flag=True,
              help="wait for the job to end and exit with its exit code (1 if it ended without one), like sbatch's")
@click.option("--json", "as_json", is_flag=True,
              help='print {"job_id": N} instead of a sentence (with --wait: also "state", "exit_code", "reason")')
@click.argument("command", nargs=-1)
@with_master
def submit(client: MasterClient, command: tuple[str, ...], synthetic: str | None, **options: Any) -> None:
    """Submit a job: `gang submit -n 4 -- ./prog args` or `gang submit -n 4 --synthetic io`."""
    if bool(command) == bool(synthetic):
        raise click.UsageError("give either a command after -- or --synthetic KIND")
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
        if client.endpoint.startswith("ipc://") and not shutil.which(argv[0]):
            raise click.ClickException(f"command not found: {argv[0]}")
    env = {}
    for export in options["exports"]:
        key, sep, value = export.partition("=")
        if not sep or not key:
            raise click.UsageError(f"--export takes KEY=VALUE, not {export!r}")
        env[key] = value
    nodes, tasks_per_node = options["nodes"], options["tasks_per_node"]
    tasks = options["tasks"] or (nodes or 1) * (tasks_per_node or 1)
    try:
        spec = JobSpec(
            name=options["name"] or synthetic or os.path.basename(argv[0]),
            user=getpass.getuser(),
            tasks=tasks,
            nodes=nodes,
            tasks_per_node=tasks_per_node,
            mpi=MpiKind(options["mpi"]),
            argv=argv,
            cwd=os.path.abspath(options["chdir"]) if options["chdir"] else os.getcwd(),
            env=env,
            exclusive=options["exclusive"],
            estimate_s=options["estimate"],
            priority=options["priority"],
            migratable=migratable,
            requeue=options["requeue"],
            output=options["output"],
        )
    except ValidationError as error:
        raise click.UsageError(error.errors()[0]["msg"].removeprefix("Value error, ")) from None
    job_id = client.submit(spec, retry_s=SUBMIT_RETRY_S)
    if not options["wait"]:
        if options["as_json"]:
            click.echo(json.dumps({"job_id": job_id}))
        else:
            console.print(f"submitted job {job_id}")
        return
    if not options["as_json"]:
        console.print(f"submitted job {job_id}, waiting for it to end")
    while not (info := client.job(job_id)).state.is_final:
        time.sleep(_WAIT_POLL_S)
    code = _exit_code(info.state, info.exit_code)
    if options["as_json"]:
        click.echo(json.dumps({"job_id": job_id, "state": info.state.value, "exit_code": info.exit_code,
                               "reason": info.reason}))
    else:
        console.print(f"job {job_id} {info.state.value}" + (f": {info.reason}" if info.reason else ""))
    raise SystemExit(code)


def _exit_code(state: JobState, exit_code: int | None) -> int:
    """A shell's convention: the job's status, 128 + N for a signal N, 1 for an end without a status."""
    if state is JobState.COMPLETED:
        return 0
    if exit_code is None or exit_code == 0:
        return 1
    return 128 - exit_code if exit_code < 0 else exit_code


@click.command()
@click.option("-a", "--all", "include_finished", is_flag=True, help="finished jobs too")
@click.option("-u", "--user", "users", default=None, help="only these users' jobs (comma-separated)")
@click.option("-t", "--states", default=None,
              help="only jobs in these states (comma-separated: pending,running,completed,... or PD,R,CD,...)")
@click.option("-o", "--format", "fields", default=columns.QUEUE_FORMAT, show_default=True,
              help=f"the columns, comma-separated, of: {', '.join(columns.JOB_FIELDS)}")
@click.option("--json", "as_json", is_flag=True, help="the jobs as JSON: a list of JobInfo (docs/protocol.md)")
@click.argument("job_ids", nargs=-1, type=int)
@with_master
def queue(client: MasterClient, include_finished: bool, users: str | None, states: str | None, fields: str,
          as_json: bool, job_ids: tuple[int, ...]) -> None:
    """List jobs, like squeue: state, nodes, elapsed time, utilization, barriers/s."""
    shown = _columns(columns.JOB_FIELDS, fields)
    wanted_states = _states(states)
    jobs = client.jobs(list(job_ids) or None, include_finished or bool(job_ids) or wanted_states is not None)
    missing = set(job_ids) - {job.job_id for job in jobs}
    jobs = [job for job in jobs if (users is None or job.spec.user in users.split(","))
            and (wanted_states is None or job.state in wanted_states)]
    _print(jobs, shown, as_json)
    if missing:
        raise click.ClickException(f"no such job: {', '.join(map(str, sorted(missing)))}")


def _states(given: str | None) -> set[str] | None:
    if given is None:
        return None
    codes = {code: state for state, code in columns.STATE_CODES.items()}
    wanted = set()
    for name in given.split(","):
        state = codes.get(name.strip().upper(), name.strip().lower())
        if state not in columns.STATE_CODES:
            raise click.BadParameter(f"no state {name!r}: one of {', '.join(columns.STATE_CODES)}",
                                     param_hint="-t/--states")
        wanted.add(state)
    return wanted


def _columns(fields: dict[str, "columns.Column[Any]"], spec: str) -> "list[columns.Column[Any]]":
    try:
        return columns.chosen(fields, spec)
    except ValueError as error:
        raise click.BadParameter(str(error), param_hint="-o/--format") from None


def _print(rows: list[Any], shown: "list[columns.Column[Any]]", as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([row.model_dump(mode="json") for row in rows], indent=1))
    else:
        click.echo(columns.render(shown, rows))


@click.command()
@click.option("--json", "as_json", is_flag=True, help='print [{"job_id": N, "state": ...}] instead of sentences')
@click.argument("job_ids", nargs=-1, type=int, required=True)
@with_master
def cancel(client: MasterClient, job_ids: tuple[int, ...], as_json: bool) -> None:
    """Cancel jobs, like scancel: their tasks get SIGTERM, then SIGKILL."""
    failures, cancelled = [], []
    for job_id in job_ids:
        try:
            cancelled.append(client.cancel(job_id, getpass.getuser()))
            if not as_json:
                console.print(f"job {job_id} cancelled")
        except RequestRefused as error:
            failures.append(error)
    if as_json:
        click.echo(json.dumps([reply.model_dump(mode="json", exclude={"type"}) for reply in cancelled]))
    if failures:
        reason = "; ".join(failure.reason for failure in failures)
        if as_json:
            _json_error(reason, failures[0].code.value)
        raise click.ClickException(reason)


@click.command()
@click.option("-o", "--format", "fields", default=columns.NODES_FORMAT, show_default=True,
              help=f"the columns, comma-separated, of: {', '.join(columns.NODE_FIELDS)}")
@click.option("--json", "as_json", is_flag=True, help="the nodes as JSON: a list of NodeInfo (docs/protocol.md)")
@with_master
def nodes(client: MasterClient, fields: str, as_json: bool) -> None:
    """List nodes, like sinfo: state, CPU share, jobs, last heard from."""
    _print(client.nodes(), _columns(columns.NODE_FIELDS, fields), as_json)


@click.command()
@click.option("--watch", is_flag=True, help="refresh every quantum until ^C")
@click.option("--json", "as_json", is_flag=True, help="the matrix once as JSON: a MatrixView (docs/protocol.md)")
@with_master
def matrix(client: MasterClient, watch: bool, as_json: bool) -> None:
    """Show the Ousterhout matrix: slots by nodes, the running slot marked."""
    if watch and as_json:
        raise click.UsageError("--json prints the matrix once: not with --watch")
    view = client.matrix()
    if as_json:
        click.echo(json.dumps(view.model_dump(mode="json", exclude={"type"}), indent=1))
        return
    if not watch:
        console.print(views.matrix(view, client.jobs()))
        return
    with Live(views.matrix(view, client.jobs()), console=console, auto_refresh=False) as live:
        try:
            while True:
                time.sleep(max(view.quantum_ms, 100) / 1000)
                view = client.matrix()
                live.update(views.matrix(view, client.jobs()), refresh=True)
        except KeyboardInterrupt:
            pass
