"""How the click job commands reach the master (``master_access``) and report its refusals."""

import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gangsched.cli.master_access import NoMaster, error_code, find_master, json_error
from gangsched.client.master_client import MasterClient, MasterUnreachable, RequestRefused
from gangsched.daemon.curve import CurveError


def with_master(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give the command a connected client; turn the master's refusals into one-line errors."""

    @click.option("--master", "master_endpoint", default=None, help="the master's endpoint")
    @click.option("--keys", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="CURVE key folder (gang keygen) [$GANG_KEYS]")
    @functools.wraps(command)
    def wrapper(master_endpoint: str | None, keys: Path | None, **kwargs: Any) -> Any:
        try:
            endpoint, key_folder = find_master(master_endpoint, keys)
            with MasterClient(endpoint, keys=key_folder) as client:
                return command(client, **kwargs)
        except (NoMaster, MasterUnreachable, RequestRefused, CurveError) as error:
            if kwargs.get("as_json"):
                json_error(str(error), error_code(error))
            raise click.ClickException(str(error)) from None

    return wrapper
