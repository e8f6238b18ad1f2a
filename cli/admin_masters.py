"""`gang admin masters` and `gang admin takeover`: the masters that share a PostgreSQL store, and the
lead moved on purpose (Slurm's ``scontrol takeover``; docs/architecture.md, "Leadership")."""

import json
import time

import click

from gangsched.cli.connect import with_master
from gangsched.cli.table import Column, render
from gangsched.client.master_client import MasterClient
from gangsched.protocol.leadership_messages import MasterInfo

_TAKEOVER_WAIT_S = 30.0


@click.command()
@click.option("--json", "as_json", is_flag=True, help="print the masters as JSON: a list of MasterInfo")
@with_master
def masters(client: MasterClient, as_json: bool) -> None:
    """Each master with its role (active, standby, down), epoch, host, endpoint and pid."""
    listed = client.masters()
    if as_json:
        click.echo(json.dumps([master.model_dump(mode="json") for master in listed]))
        return
    columns: list[Column[MasterInfo]] = [
        Column("ROLE", 7, lambda master: master.role.value),
        Column("EPOCH", 5, lambda master: str(master.epoch) if master.epoch else "-", right=True),
        Column("HOST", 8, lambda master: master.host, widens=True),
        Column("PID", 7, lambda master: str(master.pid), right=True),
        Column("SEEN", 6, lambda master: f"{master.seen_s:.1f}s", right=True),
        Column("ENDPOINT", 8, lambda master: master.endpoint)]
    click.echo(render(columns, listed))


@click.command()
@click.option("--to", "to", default=None, metavar="ENDPOINT",
              help="the standby to take the lead (default: the one asked, else the one heard from last)")
@click.option("--json", "as_json", is_flag=True, help="print the new leader as JSON (a MasterInfo)")
@with_master
def takeover(client: MasterClient, to: str | None, as_json: bool) -> None:
    """Move the lead to a standby master after the leader's next quantum; wait until it leads."""
    asked = client.takeover(to)
    deadline = time.monotonic() + _TAKEOVER_WAIT_S
    while time.monotonic() < deadline:
        leader = client.leader()
        if leader is not None and leader.endpoint == asked.to and leader.epoch > asked.epoch:
            if as_json:
                click.echo(json.dumps(leader.model_dump(mode="json")))
            else:
                click.echo(f"{leader.endpoint} leads (epoch {leader.epoch}); {asked.leader or 'none'} stands by")
            return
        time.sleep(0.05)
    raise click.ClickException(f"{asked.to} did not take the lead within {_TAKEOVER_WAIT_S:g} s: "
                               "see gang admin masters and the masters' logs")
