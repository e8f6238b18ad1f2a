"""`gang cluster up|down|status`: the embedded local cluster."""

from typing import Any

import click
from rich.console import Console

from gangsched.cli import views
from gangsched.cli.options import cluster_options
from gangsched.deploy.local import ClusterConfig, ClusterError, LocalCluster

console = Console()


@click.group()
def cluster() -> None:
    """The embedded local cluster: master, node daemons and I/O server as processes."""


@cluster.command("up")
@cluster_options
def cluster_up(**shape: Any) -> None:
    """Start a local cluster and wait until every node has registered."""
    local = LocalCluster()
    try:
        state = local.up(ClusterConfig(**shape))
    except ClusterError as error:
        raise click.ClickException(str(error)) from None
    console.print(f"cluster up: {shape['nodes']} nodes, quantum {shape['quantum_ms']} ms, "
                  f"master at {state.master}; logs in {local.home}/logs")


@cluster.command("down")
def cluster_down() -> None:
    """Stop the local cluster; the node daemons end every task first."""
    stopped = LocalCluster().down()
    console.print(f"stopped: {', '.join(stopped)}" if stopped else "no local cluster was running")


@cluster.command("status")
def cluster_status() -> None:
    """Which daemons of the local cluster are alive."""
    local = LocalCluster()
    state = local.state()
    if state is None:
        console.print(f"no local cluster in {local.home}")
        return
    console.print(views.daemons(state, local.alive()))
