"""A network namespace of its own for one daemon, joined to this one by a veth pair whose addresses exist
only on that pair, and whose link can be taken down and up: a host cut off from the network, for real,
on one machine (root's). ``gang bench failover --faults cut``, ``gang bench chaos --masters 2`` and
tests/test_master_isolation.py run the first master in one."""

import os
import secrets
import subprocess
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.local import Confinement
from gangsched.deploy.postgres_server import running

HOST, INNER = "10.77.91.1", "10.77.91.2"  # this namespace's end of the pair, and the isolated one's


@dataclass(frozen=True)
class Namespace:
    name: str
    host_link: str
    host_address: str = HOST
    inner_address: str = INNER

    def prefix(self) -> list[str]:
        """What runs a command inside it."""
        return ["ip", "netns", "exec", self.name]

    def link(self, up: bool) -> None:
        """Take the pair's link down (the namespace cut off from everything) or up again."""
        subprocess.run(["ip", "link", "set", self.host_link, "up" if up else "down"], check=True)

    def confinement(self) -> Confinement:
        """A local cluster's first master in here, bound on the pair's inner address."""
        return Confinement(self.prefix(), self.inner_address)


@contextmanager
def isolated() -> Iterator[Namespace]:
    """A namespace, its pair up, removed afterwards; PermissionError where this process is not root."""
    if os.geteuid() != 0:
        raise PermissionError("network namespaces are made by root")
    tag = secrets.token_hex(3)
    name, host_link, inner_link = f"gang-{tag}", f"gh{tag}", f"gi{tag}"
    inside = ["ip", "netns", "exec", name]
    steps = [["ip", "netns", "add", name],
             ["ip", "link", "add", host_link, "type", "veth", "peer", "name", inner_link],
             ["ip", "link", "set", inner_link, "netns", name],
             ["ip", "addr", "add", f"{HOST}/24", "dev", host_link],
             ["ip", "link", "set", host_link, "up"],
             [*inside, "ip", "addr", "add", f"{INNER}/24", "dev", inner_link],
             [*inside, "ip", "link", "set", inner_link, "up"],
             [*inside, "ip", "link", "set", "lo", "up"]]
    try:
        for step in steps:
            subprocess.run(step, check=True, capture_output=True)
        yield Namespace(name, host_link)
    finally:
        subprocess.run(["ip", "link", "del", host_link], capture_output=True)
        subprocess.run(["ip", "netns", "del", name], capture_output=True)


@contextmanager
def shared_store(config: ClusterConfig, folder: Path, cut: bool) -> Iterator[tuple[ClusterConfig, Namespace | None]]:
    """For masters that share a store: a PostgreSQL server of the run's own in ``folder`` and, where ``cut``,
    a namespace for the first master, which then reaches the server and is reached over the pair (TCP, with
    keys). The cluster's configuration on that store, and the namespace."""
    with ExitStack() as stack:
        namespace = stack.enter_context(isolated()) if cut else None
        url = stack.enter_context(running(folder, namespace.host_address if namespace else "")).url
        yield config.replace(store=url, keys=config.keys or namespace is not None), namespace
