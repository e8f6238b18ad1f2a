"""`gang cluster up|down|status`: the embedded local cluster."""

from typing import Any

import click

from gangsched.cli import views
from gangsched.cli.console import command_console
from gangsched.cli.options import cluster_config, cluster_options
from gangsched.deploy.local import ClusterError, LocalCluster

console = command_console()


DOCKER = click.option("--docker", is_flag=True,
                      help="the docker-compose cluster (containers as nodes) instead of local processes")


@click.group()
def cluster() -> None:
    """A cluster to run on: local processes (the default) or docker-compose containers."""


@cluster.command("up")
@DOCKER
@click.option("--keys", is_flag=True,
              help="local: CURVE keys (made in GANG_HOME/keys) on loopback TCP, so other accounts submit with "
              "keys of theirs and, started as root, run as themselves; the docker cluster always has keys")
@click.option("--masters", type=click.IntRange(1, 9), default=1, show_default=True,
              help="local: masters sharing one PostgreSQL store, one leading, the others standing by: --store, or "
              "a server of the cluster's own (Debian's postgresql) in GANG_HOME/postgres (root's: in /var/tmp)")
@cluster_options
def cluster_up(docker: bool, keys: bool, masters: int, **shape: Any) -> None:
    """Start a cluster and wait until every node has registered."""
    config = cluster_config(**shape, keys=keys, masters=masters)
    try:
        if docker:
            from gangsched.deploy.compose import DockerCluster

            compose = DockerCluster()
            docker_state = compose.up(config)  # (re)builds the image, cached
            console.print(f"docker cluster up: {config.nodes} node containers, quantum {config.quantum_ms} ms, "
                          f"master at {docker_state.master}; logs: docker-compose -p gangsched logs")
            if config.http_bind:
                token = compose.web_token()
                console.print(f"metrics and web view: http://{config.http_bind}/?token={token} (metrics at "
                              f"/metrics with 'Authorization: Bearer TOKEN'; the token is in {compose.home}/web-token)")
            return
        local = LocalCluster()
        state = local.up(config)
    except ClusterError as error:
        raise click.ClickException(str(error)) from None
    how = f"configured by {config.config_file}" if config.config_file else f"quantum {config.quantum_ms} ms"
    console.print(f"cluster up: {config.nodes} nodes, {how}, master at {state.master}; logs in {local.home}/logs")
    if config.http_bind:
        token_file = local.home / "master" / "web-token"
        token = token_file.read_text().strip() if token_file.exists() else "TOKEN"
        console.print(f"metrics and web view: http://{config.http_bind}/?token={token} (metrics at /metrics with "
                      f"'Authorization: Bearer TOKEN'; the token is in {token_file})")


@cluster.command("down")
@DOCKER
def cluster_down(docker: bool) -> None:
    """Stop the cluster; the node daemons end every task first."""
    if docker:
        from gangsched.deploy.compose import DockerCluster

        try:
            stopped = DockerCluster().down()
        except ClusterError as error:
            raise click.ClickException(str(error)) from None
        console.print("docker cluster down" if stopped else "no docker cluster was running")
        return
    names = LocalCluster().down()
    console.print(f"stopped: {', '.join(names)}" if names else "no local cluster was running")


@cluster.command("restart")
@click.argument("daemon")
@click.option("--crash", is_flag=True, help="kill -9 instead of SIGTERM: as a crash would")
def cluster_restart(daemon: str, crash: bool) -> None:
    """Stop one daemon of the local cluster (master, ioserver, node1, ...) and start it again."""
    try:
        LocalCluster().restart(daemon, crash=crash)
    except ClusterError as error:
        raise click.ClickException(str(error)) from None
    console.print(f"{daemon} restarted" + (" after kill -9" if crash else ""))


@cluster.command("status")
@DOCKER
def cluster_status(docker: bool) -> None:
    """Which daemons of the cluster are alive."""
    if docker:
        from gangsched.deploy.compose import DockerCluster

        try:
            console.print(DockerCluster().compose("ps"))
        except ClusterError as error:
            raise click.ClickException(str(error)) from None
        return
    local = LocalCluster()
    state = local.state()
    if state is None:
        console.print(f"no local cluster in {local.home}")
        return
    console.print(views.daemons(state, local.alive()))
