"""`gang master|noded|ioserver`: run one daemon in the foreground."""

import getpass
import os
from pathlib import Path
from typing import Any

import click

from gangsched.cli.console import command_console
from gangsched.cli.options import build, settings_options
from gangsched.jobs.ioserver import IoServerSettings
from gangsched.master.settings import MasterSettings
from gangsched.noded.settings import NodeSettings

console = command_console()


@click.command()
@settings_options(MasterSettings)
def master(**given: Any) -> None:
    """Run the master daemon (job table, matrix, quantum timer)."""
    from gangsched.daemon.logs import setup_logging
    from gangsched.master.config_file import ConfigError, master_settings
    from gangsched.master.loop import run_master

    try:
        settings = master_settings(given)
    except ConfigError as error:
        raise click.ClickException(str(error)) from None
    setup_logging("master", settings.log_level, settings.log_file)
    run_master(settings, {name: value for name, value in given.items() if value is not None and name != "config"})


@click.command()
@settings_options(NodeSettings)
def noded(**given: Any) -> None:
    """Run a node daemon (launches tasks, applies switches, reports CPU use)."""
    from gangsched.daemon.cluster_file import ClusterFileError, configured_masters
    from gangsched.daemon.logs import setup_logging
    from gangsched.noded.loop import run_node

    settings = build(NodeSettings, given)
    if given.get("master") is None and "GANG_NODE_MASTER" not in os.environ:  # the file's, below both
        try:
            masters = configured_masters(settings.config)
        except ClusterFileError as error:
            raise click.ClickException(str(error)) from None
        if masters is not None:
            settings = build(NodeSettings, {**given, "master": masters})
    setup_logging(f"noded[{settings.name}]", settings.log_level, settings.log_file)
    run_node(settings)


@click.command()
@settings_options(IoServerSettings)
def ioserver(**given: Any) -> None:
    """Run the I/O server that synthetic I/O jobs write to."""
    from gangsched.daemon.logs import setup_logging
    from gangsched.jobs.ioserver import run_ioserver

    settings = build(IoServerSettings, given)
    setup_logging("ioserver", settings.log_level, settings.log_file)
    run_ioserver(settings)


@click.command()
@click.argument("folder", type=click.Path(file_okay=False, path_type=Path))
@click.option("--user", "users", multiple=True, help="a CLI user to make a key for [you]; repeatable")
def keygen(folder: Path, users: tuple[str, ...]) -> None:
    """Make CURVE keys: the master's, the nodes', and one per user, all but the master's authorized."""
    from gangsched.daemon.curve import CurveError
    from gangsched.daemon.curve import keygen as make_keys

    try:
        made = make_keys(folder, list(users) or [getpass.getuser()])
    except CurveError as error:
        raise click.ClickException(str(error)) from None
    console.print(f"made {len(made)} key pair(s) in {folder}" if made else f"the keys in {folder} were all there")
    console.print(f"master: --keys {folder}; nodes: --keys {folder} (they need node.key_secret and master.key); "
                  f"clients: --keys {folder} or GANG_KEYS={folder}")
