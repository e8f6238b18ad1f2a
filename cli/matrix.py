"""`gang matrix`: the Ousterhout matrix, slots by nodes, as a table or JSON."""

import json
import time

import click

from gangsched.cli.connect import with_master
from gangsched.client.master_client import MasterClient


@click.command()
@click.option("-p", "--partition", default=None, help="the partition whose matrix [the default partition's]")
@click.option("--watch", is_flag=True, help="refresh every quantum until ^C")
@click.option("--json", "as_json", is_flag=True, help="the matrix once as JSON: a MatrixView (docs/protocol.md)")
@with_master
def matrix(client: MasterClient, partition: str | None, watch: bool, as_json: bool) -> None:
    """Show the Ousterhout matrix: slots by nodes, the running slot marked."""
    if watch and as_json:
        raise click.UsageError("--json prints the matrix once: not with --watch")
    view = client.matrix(partition)
    if as_json:
        click.echo(json.dumps(view.model_dump(mode="json", exclude={"type"}), indent=1))
        return
    from rich.live import Live

    from gangsched.cli import views
    from gangsched.cli.console import command_console  # here only: the list commands start sooner without rich

    console = command_console()
    if not watch:
        console.print(views.matrix(view, client.jobs()))
        return
    with Live(views.matrix(view, client.jobs()), console=console, auto_refresh=False) as live:
        try:
            while True:
                time.sleep(max(view.quantum_ms, 100) / 1000)
                view = client.matrix(partition)
                live.update(views.matrix(view, client.jobs()), refresh=True)
        except KeyboardInterrupt:
            pass
