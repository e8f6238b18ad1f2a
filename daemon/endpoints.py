"""ZeroMQ endpoint strings: from what a socket bound to what a peer connects to,
and which binds are safe without keys."""

from __future__ import annotations

import os
import stat

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from pathlib import Path

_WILDCARDS = {"*", "0.0.0.0", "::", "[::]"}


def connectable(bound: str, via: str) -> str:
    """``bound`` (e.g. ``tcp://0.0.0.0:7071``) as reached by a peer that reached ``via``.

    A wildcard host is replaced by the host the peer used for ``via``; ipc and
    concrete addresses are returned unchanged.
    """
    return reachable_at(bound, via.partition("://")[2].rpartition(":")[0])


def reachable_at(bound: str, host: str) -> str:
    """``bound`` with a wildcard host replaced by ``host``; ipc and concrete addresses unchanged."""
    scheme, _, address = bound.partition("://")
    bound_host, _, port = address.rpartition(":")
    if scheme != "tcp" or bound_host not in _WILDCARDS:
        return bound
    return f"tcp://{host}:{port}"


# a master's default sockets: ipc in its own state folder, where nodes and clients of the
# same account find them without being told (the state folder is 0700); a string, as a job command
# reads it without pathlib
DEFAULT_STATE_DIR = os.path.join(os.path.expanduser("~"), ".gangsched", "master")
MASTER_SOCKET, SWITCH_SOCKET, REPORT_SOCKET = "master.sock", "switch.sock", "report.sock"


def default_endpoint(socket: str, state_dir: str | os.PathLike[str] = DEFAULT_STATE_DIR) -> str:
    return f"ipc://{os.path.join(state_dir, socket)}"


class UnsafeBind(Exception):
    """A bind without keys that another account could reach."""


def private_ipc(endpoint: str) -> None:
    """Make sure only this account can reach the ipc socket ``endpoint``, or raise UnsafeBind.

    Without keys the socket's folder is the only gate on who may submit and
    cancel: TCP (loopback too) lets in every account of the machine, so only
    ipc sockets in a folder of this account's that no other account may enter
    pass. A missing folder is made 0700.
    """
    scheme, _, address = endpoint.partition("://")
    if scheme != "ipc":
        raise UnsafeBind(f"{endpoint} lets in every account that reaches it: without --keys (make them with "
                         "`gang keygen`) the master binds only ipc:// sockets")
    folder = os.path.dirname(address) or "."
    os.makedirs(folder, mode=0o700, exist_ok=True)
    status = os.stat(folder)
    if status.st_uid != os.geteuid() or status.st_mode & 0o077:
        raise UnsafeBind(f"{endpoint} is in {folder} (mode {stat.filemode(status.st_mode)}, uid {status.st_uid}), "
                         "which other accounts may enter: without --keys its folder must be this account's "
                         "and 0700")


def write_atomically(path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a reader sees the old file or the new one."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(text)
    os.replace(partial, path)
