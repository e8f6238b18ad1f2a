"""Which master the job commands talk to (``--master``, else GANG_MASTER, else the local cluster
`gang cluster up` started, else the masters of the cluster's configuration file, else this account's
`gang master`), and how they report failing to.

Without click: the list commands (``listing``) parse their arguments with argparse."""

import os
import stat
import sys

from gangsched.client.connection import KeyFolderPath, RequestRefused
from gangsched.daemon.cluster_file import ClusterFileError, configured_masters
from gangsched.daemon.endpoints import MASTER_SOCKET, default_endpoint
from gangsched.deploy.home import cluster_master


class NoMaster(Exception):
    pass


# long enough for a master to restart: its tries carry one token, so a retry never makes a second job
SUBMIT_RETRY_S = 30.0

def find_master(explicit: str | None, keys: KeyFolderPath | None) -> tuple[str, KeyFolderPath | None]:
    """The master to talk to, and the CURVE keys to talk with."""
    keys = keys or os.environ.get("GANG_KEYS") or None
    if explicit:
        return explicit, keys
    if os.environ.get("GANG_MASTER"):
        return os.environ["GANG_MASTER"], keys
    cluster = cluster_master()
    if cluster is not None:
        return cluster.endpoint, keys or cluster.keys
    try:
        configured = configured_masters()
    except ClusterFileError as error:
        raise NoMaster(str(error)) from None
    if configured is not None:
        return configured, keys
    if _is_socket(default_endpoint(MASTER_SOCKET).removeprefix("ipc://")):
        return default_endpoint(MASTER_SOCKET), keys  # a `gang master` of this account's, with its defaults
    raise NoMaster(
        "no master: start one with `gang cluster up [--docker]` or `gang master`, or give --master / GANG_MASTER, "
        "or [cluster] masters in /etc/gangsched/gangsched.toml"
    )


def _is_socket(path: str) -> bool:
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def error_code(error: Exception) -> str:
    """What --json names an error by: the master's code for a refusal, else the kind of failure."""
    return error.code.value if isinstance(error, RequestRefused) else type(error).__name__


def json_error(reason: str, code: str) -> None:
    """With --json, a script reads the error as it reads the answer: JSON, on stderr, and exit status 1."""
    import json  # here: only --json needs it

    print(json.dumps({"error": reason, "code": code}), file=sys.stderr)
    raise SystemExit(1)
