"""`gang show job ID` and `gang show node NAME`: every field the master has of one job or node, as
Slurm's ``scontrol show`` prints them, readable or as JSON (docs/operations.md)."""

import json
from typing import Any

import click

from gangsched.cli.connect import with_master
from gangsched.client.master_client import MasterClient, RequestRefused
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.times import format_time


@click.group()
def show() -> None:
    """Every field of a job or a node, like scontrol show."""


@show.command()
@click.argument("job_id", type=int)
@click.option("--json", "as_json", is_flag=True, help="print the job as JSON: a JobInfo")
@with_master
def job(client: MasterClient, job_id: int, as_json: bool) -> None:
    """Every field of job JOB_ID, pending, running or ended."""
    _print(client.job(job_id).model_dump(mode="json"), as_json)


@show.command()
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="print the node as JSON: a NodeInfo")
@with_master
def node(client: MasterClient, name: str, as_json: bool) -> None:
    """Every field of node NAME."""
    found = next((each for each in client.nodes() if each.name == name), None)
    if found is None:
        raise RequestRefused(ErrorCode.INVALID_SPEC, f"no node {name}: gang nodes lists them")
    _print(found.model_dump(mode="json"), as_json)


def _print(fields: dict[str, Any], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps(fields, indent=1))
        return
    for key, value in _flat(fields):
        click.echo(f"{key}={value}")


def _flat(fields: dict[str, Any], prefix: str = "") -> list[tuple[str, str]]:
    """Key=value pairs, nested models' keys joined by dots, lists by commas, times as dates; none for empty
    values."""
    pairs = []
    for key, value in fields.items():
        if isinstance(value, dict) and key != "env":
            pairs += _flat(value, f"{prefix}{key}.")
        elif isinstance(value, list) and value and isinstance(value[0], dict):
            for index, each in enumerate(value):
                pairs += _flat(each, f"{prefix}{key}[{index}].")
        elif value not in (None, [], {}, ""):
            shown = ",".join(map(str, value)) if isinstance(value, list) else \
                " ".join(f"{name}={each}" for name, each in value.items()) if isinstance(value, dict) else \
                format_time(value) if key.endswith("time") or key in ("start", "end") else value
            pairs.append((f"{prefix}{key}", str(shown)))
    return pairs
