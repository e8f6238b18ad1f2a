"""ZeroMQ endpoint strings: from what a socket bound to what a peer connects to."""

_WILDCARDS = {"*", "0.0.0.0", "::", "[::]"}


def connectable(bound: str, via: str) -> str:
    """``bound`` (e.g. ``tcp://0.0.0.0:7071``) as reached by a peer that reached ``via``.

    A wildcard host is replaced by the host the peer used for ``via``; ipc and
    concrete addresses are returned unchanged.
    """
    scheme, _, address = bound.partition("://")
    host, _, port = address.rpartition(":")
    if scheme != "tcp" or host not in _WILDCARDS:
        return bound
    via_host = via.partition("://")[2].rpartition(":")[0]
    return f"tcp://{via_host}:{port}"


def is_local(endpoint: str) -> bool:
    """Whether only this machine can reach ``endpoint`` (ipc, inproc, or tcp on loopback)."""
    scheme, _, address = endpoint.partition("://")
    if scheme in ("ipc", "inproc"):
        return True
    host = address.rpartition(":")[0].strip("[]")
    return host in ("127.0.0.1", "localhost", "::1")
