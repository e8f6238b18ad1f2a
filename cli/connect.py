"""How the job commands reach the master: ``--master``, else GANG_MASTER, else the local
cluster `gang cluster up` started; and how they report its refusals."""

import functools
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from gangsched.daemon.curve import CurveError
from gangsched.daemon.endpoints import MASTER_SOCKET, default_endpoint
from gangsched.deploy.home import cluster_master
from gangsched.master.client import MasterClient, MasterUnreachable, RequestRefused


def _master(explicit: str | None, keys: Path | None) -> tuple[str, Path | None]:
    """The master to talk to, and the CURVE keys to talk with."""
    keys = keys or (Path(os.environ["GANG_KEYS"]) if os.environ.get("GANG_KEYS") else None)
    if explicit:
        return explicit, keys
    if os.environ.get("GANG_MASTER"):
        return os.environ["GANG_MASTER"], keys
    cluster = cluster_master()
    if cluster is not None:
        return cluster.endpoint, keys or cluster.keys
    if Path(default_endpoint(MASTER_SOCKET).removeprefix("ipc://")).is_socket():
        return default_endpoint(MASTER_SOCKET), keys  # a `gang master` of this account's, with its defaults
    raise click.ClickException(
        "no master: start one with `gang cluster up [--docker]` or `gang master`, or give --master / GANG_MASTER"
    )


def with_master(command: Callable[..., Any]) -> Callable[..., Any]:
    """Give the command a connected client; turn the master's refusals into one-line errors."""

    @click.option("--master", "master_endpoint", default=None, help="the master's endpoint")
    @click.option("--keys", type=click.Path(file_okay=False, path_type=Path), default=None,
                  help="CURVE key folder (gang keygen) [$GANG_KEYS]")
    @functools.wraps(command)
    def wrapper(master_endpoint: str | None, keys: Path | None, **kwargs: Any) -> Any:
        try:
            endpoint, key_folder = _master(master_endpoint, keys)
            with MasterClient(endpoint, keys=key_folder) as client:
                return command(client, **kwargs)
        except (MasterUnreachable, RequestRefused, CurveError) as error:
            if kwargs.get("as_json"):
                code = error.code.value if isinstance(error, RequestRefused) else type(error).__name__
                json_error(str(error), code)
            raise click.ClickException(str(error)) from None

    return wrapper


def json_error(reason: str, code: str) -> None:
    """With --json, a script reads the error as it reads the answer: JSON, on stderr, and exit status 1."""
    click.echo(json.dumps({"error": reason, "code": code}), err=True)
    raise SystemExit(1)
