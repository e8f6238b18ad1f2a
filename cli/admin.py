"""`gang admin`: the administrator's commands (root only): nodes out of service and back, jobs
suspended and resumed, the record of these commands (cli/admin_nodes.py, cli/job_control.py;
docs/operations.md), the settings of users, like Slurm's sacctmgr, and the check of a configuration
file (anyone, without a master).

A user's political priority (0-1) and quota (processor-seconds) feed slack-based
backfilling: a user over quota gets PP = -1, so their new jobs have infinite
slack and yield to everyone else's.
"""

import json
from pathlib import Path

import click
from rich.table import Table

from gangsched.cli.admin_masters import masters, takeover
from gangsched.cli.admin_nodes import admin_log, node
from gangsched.cli.admin_reservations import reservation
from gangsched.cli.connect import with_master
from gangsched.cli.console import command_console
from gangsched.cli.job_control import resume, suspend
from gangsched.cli.param_types import SIZE
from gangsched.client.master_client import MasterClient
from gangsched.protocol.records import UserInfo, UserLimits
from gangsched.protocol.sizes import readable

console = command_console()


@click.group()
def admin() -> None:
    """Nodes, reservations, suspensions, users, masters, configuration: root's."""


admin.add_command(node)
admin.add_command(reservation)
admin.add_command(admin_log)
admin.add_command(suspend)
admin.add_command(resume)
admin.add_command(masters)
admin.add_command(takeover)


@admin.group()
def config() -> None:
    """The cluster's configuration file (docs/configuration.md)."""


@config.command("check")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
def config_check(file: Path) -> None:
    """Validate FILE without starting anything: one line per problem, with its line and key."""
    from gangsched.master.config_file import ConfigError, read_config

    try:
        checked = read_config(file)
    except ConfigError as error:
        for line in error.lines():
            click.echo(line, err=True)
        raise SystemExit(1) from None
    partitions = ", ".join(partition.name for partition in checked.partitions) or "one over every node"
    click.echo(f"{file}: valid: {len(checked.node_names())} nodes listed; partitions: {partitions}")


@admin.command()
@click.argument("user")
@click.argument("priority", type=click.FloatRange(0, 1))
@with_master
def priority(client: MasterClient, user: str, priority: float) -> None:
    """Set USER's political priority (PP), 0 to 1."""
    console.print(_users(client.set_user(user, political_priority=priority)))


@admin.command()
@click.argument("user")
@click.argument("processor_seconds")
@with_master
def quota(client: MasterClient, user: str, processor_seconds: str) -> None:
    """Set USER's quota in processor-seconds, or `none` to lift it."""
    if processor_seconds == "none":
        users = client.set_user(user, clear_quota=True)
    else:
        try:
            value = float(processor_seconds)
        except ValueError:
            raise click.UsageError(f"a quota is processor-seconds or none, not {processor_seconds!r}") from None
        users = client.set_user(user, quota_processor_s=value)
    console.print(_users(users))


@admin.command()
@with_master
def reconfigure(client: MasterClient) -> None:
    """Have the master read its configuration file again, without losing or restarting a job."""
    done = client.reconfigure()
    click.echo(f"reconfigured from {done.config}: partitions {', '.join(done.partitions)}")
    for change in done.changes or ["nothing changed"]:
        click.echo(f"  {change}")


@admin.command()
@click.argument("user")
@click.option("-p", "--partition", default=None, help="in this partition only [every partition]")
@click.option("--max-submit-jobs", type=click.IntRange(min=-1), default=None,
              help="most jobs pending and running; a submission past it is refused (Slurm's MaxSubmitJobs)")
@click.option("--max-jobs", type=click.IntRange(min=-1), default=None,
              help="most jobs running; the rest wait (Slurm's MaxJobs)")
@click.option("--max-cpus", type=click.IntRange(min=-1), default=None, help="most processors in use (MaxTRES cpu)")
@click.option("--max-memory", default=None, metavar="SIZE", help="most memory in use, e.g. 4G (MaxTRES mem)")
@click.option("--json", "as_json", is_flag=True, help="print the users as JSON: a list of UserInfo")
@with_master
def limit(client: MasterClient, user: str, partition: str | None, max_submit_jobs: int | None,
          max_jobs: int | None, max_cpus: int | None, max_memory: str | None, as_json: bool) -> None:
    """Set what USER may have at once (-1 lifts a limit), like Slurm's QOS limits."""
    memory = None if max_memory is None else -1 if max_memory == "-1" else SIZE.convert(max_memory, None, None)
    users = client.set_limits(user, partition, max_submit_jobs=max_submit_jobs, max_jobs=max_jobs,
                              max_cpus=max_cpus, max_memory=memory)
    _print_users(users, as_json)


@admin.command()
@click.option("--json", "as_json", is_flag=True, help="print the users as JSON: a list of UserInfo")
@with_master
def users(client: MasterClient, as_json: bool) -> None:
    """List the users the master knows: priority, quota, use, limits."""
    _print_users(client.users(), as_json)


def _print_users(users: list[UserInfo], as_json: bool) -> None:
    if as_json:
        click.echo(json.dumps([user.model_dump(mode="json") for user in users]))
        return
    console.print(_users(users))


def _users(users: list[UserInfo]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("USER", "PARTITION", "PP", "QUOTA(proc-s)", "USED(proc-s)", "STATE", "MAXSUBMIT", "MAXJOBS",
                   "MAXCPUS", "MAXMEM"):
        table.add_column(column)
    for user in users:
        quota = "-" if user.quota_processor_s is None else f"{user.quota_processor_s:g}"
        first = [user.user, "*", f"{user.political_priority:g}", quota, f"{user.used_processor_s:.0f}",
                 "OVER QUOTA" if user.over_quota else "ok"]
        everywhere = next((each for each in user.limits if each.partition is None), UserLimits())
        table.add_row(*first, *_limit_cells(everywhere))
        for each in user.limits:
            if each.partition is not None:
                table.add_row(user.user, each.partition, "", "", "", "", *_limit_cells(each))
    return table


def _limit_cells(limits: UserLimits) -> list[str]:
    memory = "-" if limits.max_memory is None else readable(limits.max_memory)
    return [*("-" if value is None else str(value) for value in (limits.max_submit_jobs, limits.max_jobs,
                                                                  limits.max_cpus)), memory]
