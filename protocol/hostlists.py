"""Node names as Slurm's hostlists spell them (``node[01-64],gpu1``), read and written by
ClusterShell's ``NodeSet`` (the CEA's library) rather than by hand. Node groups (``@rack1``) are
not resolved: a name is a name."""

from ClusterShell.NodeSet import RESOLVER_NOGROUP, NodeSet, NodeSetException


def expand_hostlist(text: str) -> list[str]:
    """The node names of a hostlist, in order; a malformed one raises ValueError with the reason."""
    try:
        return list(NodeSet(text, resolver=RESOLVER_NOGROUP))
    except NodeSetException as error:
        raise ValueError(f"{text!r} is not a hostlist: {error}") from None


def collect_hostlist(names: list[str]) -> str:
    """Node names as one hostlist (``node[01-04,07]``)."""
    return str(NodeSet.fromlist(names, resolver=RESOLVER_NOGROUP))
