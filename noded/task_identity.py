"""Who a task runs as on this node and where it stands among its job's ranks here: what the daemon's host
and its process managers both ask, so it depends on neither."""

import os
import pwd

from gangsched.protocol.records import TaskSpec


class LaunchError(Exception):
    """A task that cannot start on this node, with the reason for its job."""


def place_in_block(spec: TaskSpec) -> tuple[int, int, int]:
    """(which of the job's nodes this is, the rank among the job's ranks on it, how many there are)."""
    first = 0
    for index, count in enumerate(spec.block or [spec.size]):
        if spec.rank < first + count:
            return index, spec.rank - first, count
        first += count
    raise ValueError(f"rank {spec.rank} is beyond the job's layout {spec.block}")


def task_account(user: str, node: str) -> pwd.struct_passwd | None:
    """The account a root daemon runs ``user``'s task as; None: the daemon's own (it runs as that user,
    or is not root and cannot change user)."""
    if os.geteuid() != 0 or user == "root":
        return None
    try:
        return pwd.getpwnam(user)
    except KeyError:
        raise LaunchError(f"user {user} has no account on node {node}") from None
