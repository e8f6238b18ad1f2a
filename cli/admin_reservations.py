"""`gang admin reservation create|list|update|delete`: Slurm's ``scontrol create|show|update|delete
reservation`` (docs/operations.md, "Reservations")."""

import json

import click

from gangsched.cli.connect import with_master
from gangsched.cli.table import Column, render
from gangsched.client.master_client import MasterClient
from gangsched.protocol.durations import format_duration
from gangsched.protocol.hostlists import collect_hostlist
from gangsched.protocol.reservation_messages import ReservationFlag, ReservationInfo
from gangsched.protocol.times import format_time

_FLAGS = click.Choice([flag.value for flag in ReservationFlag])


@click.group()
def reservation() -> None:
    """Book nodes for a window of time, for some users' jobs."""


def _users(text: str | None) -> list[str] | None:
    return None if text is None else [user for user in text.split(",") if user]


def _flags(given: tuple[str, ...]) -> list[ReservationFlag]:
    return [ReservationFlag(flag) for each in given for flag in each.split(",") if flag]


@reservation.command()
@click.argument("name")
@click.option("--nodes", required=True, metavar="NODELIST", help="the nodes, as a hostlist: node[01-04]")
@click.option("--start", default="now", show_default=True,
              help="now, now+10minutes, now+2hours, 2026-12-01T08:00")
@click.option("--duration", required=True, help="MM, HH:MM:SS or D-HH:MM:SS")
@click.option("--users", default=None, metavar="U,...", help="who may submit to it [root only]")
@click.option("--flags", multiple=True, type=_FLAGS,
              help="maint: a maintenance window; ignore_jobs: book it even where running jobs would still run "
              "(given once each)")
@click.option("--json", "as_json", is_flag=True, help="print the reservations as JSON")
@with_master
def create(client: MasterClient, name: str, nodes: str, start: str, duration: str, users: str | None,
           flags: tuple[str, ...], as_json: bool) -> None:
    """Book NAME: nodes from a start for a duration."""
    _print(client.create_reservation(name, nodes, start, duration, _users(users), _flags(flags)), as_json)


@reservation.command()
@click.argument("name")
@click.option("--nodes", default=None, metavar="NODELIST")
@click.option("--start", default=None)
@click.option("--duration", default=None)
@click.option("--users", default=None, metavar="U,...")
@click.option("--flags", multiple=True, type=_FLAGS)
@click.option("--json", "as_json", is_flag=True, help="print the reservations as JSON")
@with_master
def update(client: MasterClient, name: str, nodes: str | None, start: str | None, duration: str | None,
           users: str | None, flags: tuple[str, ...], as_json: bool) -> None:
    """Change what is given of NAME; the rest stays."""
    reservations = client.update_reservation(name, nodes=nodes, start=start, duration=duration, users=_users(users),
                                             flags=_flags(flags) if flags else None)
    _print(reservations, as_json)


@reservation.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="print the reservations left as JSON")
@with_master
def delete(client: MasterClient, name: str, as_json: bool) -> None:
    """Delete NAME (one with jobs is refused)."""
    _print(client.delete_reservation(name), as_json)


@reservation.command(name="list")
@click.option("--json", "as_json", is_flag=True, help="print the reservations as JSON: a list of ReservationInfo")
@with_master
def list_(client: MasterClient, as_json: bool) -> None:
    """Every reservation: nodes, start, end, users, flags, jobs."""
    _print(client.reservations(), as_json)


def _print(reservations: list[ReservationInfo], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([each.model_dump(mode="json") for each in reservations]))
        return
    columns: list[Column[ReservationInfo]] = [
        Column("RESV_NAME", 9, lambda each: each.name, widens=True),
        Column("NODELIST", 8, lambda each: collect_hostlist(each.nodes), widens=True),
        Column("START_TIME", 19, lambda each: format_time(each.start)),
        Column("END_TIME", 19, lambda each: format_time(each.end)),
        Column("DURATION", 8, lambda each: format_duration(each.end - each.start), right=True),
        Column("USERS", 5, lambda each: ",".join(each.users or ["root"]), widens=True),
        Column("FLAGS", 5, lambda each: ",".join(each.flags) or "-", widens=True),
        Column("JOBS", 4, lambda each: ",".join(map(str, each.jobs)) or "-")]
    click.echo(render(columns, reservations))
