"""`gang cancel` (Slurm's scancel) and `gang matrix`, the Ousterhout matrix (the list
commands: ``listing``; submit: ``submit``)."""

import getpass
import json
import time

import click

from gangsched.cli.connect import with_master
from gangsched.cli.master_access import json_error
from gangsched.master.client import MasterClient, RequestRefused


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
