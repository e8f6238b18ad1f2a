"""`gang admin node drain|resume|down` and `gang admin log`: nodes taken out of service and back
(Slurm's ``scontrol update nodename=... state=...``), and the record of every administrative command
(docs/operations.md)."""

import json

import click

from gangsched.cli.connect import with_master
from gangsched.cli.table import Column, render
from gangsched.client.master_client import MasterClient
from gangsched.protocol.admin_messages import AdminAction, NodeAction
from gangsched.protocol.times import format_time

_DONE = {NodeAction.DRAIN: "draining", NodeAction.RESUME: "resumed", NodeAction.DOWN: "down"}


@click.group()
def node() -> None:
    """Take nodes out of service (drain, down) and back (resume)."""


def _node_command(action: NodeAction, help_text: str) -> click.Command:
    needs_reason = action is not NodeAction.RESUME

    @click.command(name=action.value, help=help_text)
    @click.argument("nodelist")
    @click.option("--reason", required=needs_reason, default=None, help="why, as gang nodes -R shows it")
    @click.option("--json", "as_json", is_flag=True, help="print the nodes and the action as JSON")
    @with_master
    def command(client: MasterClient, nodelist: str, reason: str | None, as_json: bool) -> None:
        done = client.update_nodes(nodelist, action, reason)
        if as_json:
            click.echo(json.dumps(done.model_dump(mode="json", exclude={"type"})))
            return
        click.echo(f"{nodelist}: {_DONE[action]}")

    return command


for _action, _help in ((NodeAction.DRAIN, "Drain NODELIST: no new job there; its jobs run to their end."),
                       (NodeAction.RESUME, "Put NODELIST back in service."),
                       (NodeAction.DOWN, "Take NODELIST down now: its jobs end (or are requeued).")):
    node.add_command(_node_command(_action, _help))


@click.command(name="log")
@click.option("--json", "as_json", is_flag=True, help="print the record as JSON: a list of AdminAction")
@with_master
def admin_log(client: MasterClient, as_json: bool) -> None:
    """Every administrative command, done or refused: who, what, when."""
    actions = client.admin_log()
    if as_json:
        click.echo(json.dumps([action.model_dump(mode="json") for action in actions]))
        return
    columns: list[Column[AdminAction]] = [
        Column("NUMBER", 6, lambda action: str(action.number), right=True, widens=True),
        Column("TIME", 19, lambda action: format_time(action.time)),
        Column("USER", 8, lambda action: action.user, widens=True),
        Column("RESULT", 6, lambda action: action.result.split(":")[0], widens=True),
        Column("COMMAND", 7, lambda action: action.command + (f" ({action.result.partition(': ')[2]})"
                                                               if action.result.startswith("refused") else ""))]
    click.echo(render(columns, actions))
