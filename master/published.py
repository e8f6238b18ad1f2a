"""What a running master publishes in its state folder for whoever starts it: the endpoints it bound
(a ``tcp://HOST:*`` bind takes any free port, so nobody has to guess one) and the address its web view
listens on (``--http-bind HOST:0`` likewise)."""

import json
from pathlib import Path
from typing import NamedTuple

from gangsched.daemon.endpoints import write_atomically

ENDPOINTS_FILE = "endpoints.json"
WEB_ADDRESS_FILE = "web-address"


class BoundEndpoints(NamedTuple):
    client: str  # the ROUTER: clients and node daemons
    switch: str
    report: str


def publish(state_dir: Path, endpoints: BoundEndpoints) -> None:
    state_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    write_atomically(state_dir / ENDPOINTS_FILE, json.dumps(endpoints._asdict()) + "\n")


def bound_endpoints(state_dir: Path) -> BoundEndpoints | None:
    """What the master of ``state_dir`` bound, once it has (None before, or where none ran)."""
    try:
        return BoundEndpoints(**json.loads((state_dir / ENDPOINTS_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


def web_address(state_dir: Path) -> str | None:
    """HOST:PORT its web view listens on, once it does."""
    try:
        return (state_dir / WEB_ADDRESS_FILE).read_text().strip() or None
    except OSError:
        return None
