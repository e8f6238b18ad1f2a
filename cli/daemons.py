"""`gang master|noded|ioserver`: run one daemon in the foreground."""

from typing import Any

import click

from gangsched.cli.options import build, settings_options
from gangsched.jobs.ioserver import IoServerSettings
from gangsched.master.settings import MasterSettings
from gangsched.noded.settings import NodeSettings


@click.command()
@settings_options(MasterSettings)
def master(**given: Any) -> None:
    """Run the master daemon (job table, matrix, quantum timer)."""
    from gangsched.daemon.logs import setup_logging
    from gangsched.master.daemon import run_master

    settings = build(MasterSettings, given)
    setup_logging("master", settings.log_level)
    run_master(settings)


@click.command()
@settings_options(NodeSettings)
def noded(**given: Any) -> None:
    """Run a node daemon (launches tasks, applies switches, reports CPU use)."""
    from gangsched.daemon.logs import setup_logging
    from gangsched.noded.daemon import run_node

    settings = build(NodeSettings, given)
    setup_logging(f"noded[{settings.name}]", settings.log_level)
    run_node(settings)


@click.command()
@settings_options(IoServerSettings)
def ioserver(**given: Any) -> None:
    """Run the I/O server that synthetic I/O jobs write to."""
    from gangsched.daemon.logs import setup_logging
    from gangsched.jobs.ioserver import run_ioserver

    settings = build(IoServerSettings, given)
    setup_logging("ioserver", settings.log_level)
    run_ioserver(settings)
