"""The job commands but submit, mirroring Slurm's: `queue` (squeue), `history` (sacct),
`cancel` (scancel), `nodes` (sinfo), and `matrix` for the Ousterhout matrix.

They import no more than they use (no rich but for the matrix): people run them in loops.
"""

import datetime
import getpass
import json
import re
import time
from collections.abc import Callable
from typing import Any

import click

from gangsched.cli import columns
from gangsched.cli.connect import json_error, with_master
from gangsched.master.client import MasterClient, RequestRefused


class When(click.ParamType):
    """A time as sacct takes it: ``now[-N[s|m|h|d]]``, ``YYYY-MM-DD[THH:MM[:SS]]`` or ``HH:MM[:SS]`` today."""

    name = "TIME"
    _relative = re.compile(r"now(?:-(\d+)([smhd]?))?")
    _units = {"": 1, "s": 1, "m": 60, "h": 3600, "d": 86400}

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        if match := self._relative.fullmatch(text):
            return time.time() - int(match[1] or 0) * self._units[match[2] or ""]
        try:
            if re.fullmatch(r"\d{1,2}:\d{2}(:\d{2})?", text):
                clock = datetime.datetime.strptime(text, "%H:%M:%S" if text.count(":") == 2 else "%H:%M").time()
                return datetime.datetime.combine(datetime.date.today(), clock).timestamp()
            return datetime.datetime.fromisoformat(text).timestamp()
        except ValueError:
            self.fail(f"{text!r}: a time is now[-N[s|m|h|d]], YYYY-MM-DD[THH:MM[:SS]] or HH:MM[:SS]", param, ctx)


def _midnight() -> float:
    return datetime.datetime.combine(datetime.date.today(), datetime.time()).timestamp()


def _job_filters(fields: str, since: str) -> Callable[[Any], Any]:
    """The options queue and history share: the time window, whose jobs, in which states, which columns, JSON."""
    options = [
        click.option("-S", "--starttime", type=When(), default=None, help=since),
        click.option("-E", "--endtime", type=When(), default=None, help="only jobs submitted before this time"),
        click.option("-o", "--format", "fields", default=fields, show_default=True,
                     help=f"the columns, comma-separated, of: {', '.join(columns.JOB_FIELDS)}"),
        click.option("-u", "--user", "users", default=None, help="only these users' jobs (comma-separated)"),
        click.option("-t", "--states", default=None,
                     help="only jobs in these states (comma-separated: pending,running,completed,... or PD,R,CD,...)"),
        click.option("--json", "as_json", is_flag=True, help="the jobs as JSON: a list of JobInfo (docs/protocol.md)"),
        click.argument("job_ids", nargs=-1, type=int),
    ]

    def decorate(command: Any) -> Any:
        for option in reversed(options):
            command = option(command)
        return command

    return decorate


@click.command()
@click.option("-a", "--all", "include_finished", is_flag=True, help="finished jobs too (the last 200)")
@_job_filters(columns.QUEUE_FORMAT, "finished jobs too: every one that ended since this time (as sacct's -S)")
@with_master
def queue(client: MasterClient, include_finished: bool, starttime: float | None, **shown: Any) -> None:
    """List jobs, like squeue: state, nodes, elapsed time, utilization, barriers/s."""
    _list_jobs(client, include_finished, starttime, **shown)


@click.command()
@_job_filters(columns.HISTORY_FORMAT, "jobs that ended since this time, or still run or wait [today, 00:00]")
@with_master
def history(client: MasterClient, starttime: float | None, **shown: Any) -> None:
    """Jobs of today, or since -S, finished or not, like sacct: state, exit code, start, end."""
    _list_jobs(client, True, _midnight() if starttime is None else starttime, **shown)


def _list_jobs(client: MasterClient, include_finished: bool, since: float | None, endtime: float | None,
               users: str | None, states: str | None, fields: str, as_json: bool, job_ids: tuple[int, ...]) -> None:
    shown = _columns(columns.JOB_FIELDS, fields)
    wanted_states = _states(states)
    finished = include_finished or bool(job_ids) or wanted_states is not None
    jobs = client.jobs(list(job_ids) or None, finished, since)
    missing = set(job_ids) - {job.job_id for job in jobs}
    jobs = [job for job in jobs if (users is None or job.spec.user in users.split(","))
            and (wanted_states is None or job.state in wanted_states)
            and (since is None or job.end_time is None or job.end_time >= since)
            and (endtime is None or job.submit_time <= endtime)]
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
                click.echo(f"job {job_id} cancelled")
        except RequestRefused as error:
            failures.append(error)
    if as_json:
        click.echo(json.dumps([reply.model_dump(mode="json", exclude={"type"}) for reply in cancelled]))
    if failures:
        reason = "; ".join(failure.reason for failure in failures)
        if as_json:
            json_error(reason, failures[0].code.value)
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
    from rich.console import Console  # here only: the list commands start sooner without rich
    from rich.live import Live

    from gangsched.cli import views

    console = Console()
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
