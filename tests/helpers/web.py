"""The web view of a live cluster, asked over HTTP with its token."""

import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

from gangsched.master.published import web_address
from tests.helpers.clusters import wait_until


def bound_address(state_dir: Path) -> str:
    """HOST:PORT the master's web view bound (``--http-bind HOST:0``), once it has."""
    found = wait_until(lambda: web_address(state_dir), 30, "the web view to bind")
    assert isinstance(found, str)
    return found


TOKENS: dict[str, str] = {}  # each web view's base URL, and its token: what ``get`` shows it unless told


def web_base(cluster) -> str:
    """The base URL of the cluster's web view, once it answers; its token is what ``get`` shows it."""
    base = f"http://{bound_address(cluster.home / 'master')}"
    TOKENS[base] = (cluster.home / "master" / "web-token").read_text().strip()
    wait_until(lambda: answers(base, (200,)), 30, "the web server to answer")
    return base


def get(url: str, headers: dict[str, str] | None = None) -> tuple[int, str, dict[str, str]]:
    token = next((token for base, token in TOKENS.items() if url.startswith(base)), None)
    if headers is None and token is not None:
        headers = {"Authorization": f"Bearer {token}"}
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode(), dict(response.headers)
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode(), dict(error.headers)


def answers(base: str, statuses: tuple[int, ...]) -> bool:
    try:
        return get(base + "/")[0] in statuses
    except OSError:
        return False
