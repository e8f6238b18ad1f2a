"""The master's viewer: the web view and metrics server, a child process that only reads.

The HTTP server (web/) runs in a process of its own so that serving a page or a
scrape never takes the master's interpreter lock in the middle of a switch. It
asks the master what it shows over a ROUTER of its own, an ipc socket in a
0700 folder of the state folder, which answers the read-only queries only: a
browser can look at the cluster, never change it.
"""

import logging
import os
import secrets
import subprocess
import sys
from pathlib import Path

from gangsched.daemon.endpoints import private_ipc
from gangsched.master.published import WEB_ADDRESS_FILE

log = logging.getLogger("gangsched.master")

_STOP_GRACE_S = 5.0


def viewer_endpoint(state_dir: Path) -> str:
    endpoint = f"ipc://{state_dir / 'viewer' / 'viewer.sock'}"
    private_ipc(endpoint)
    return endpoint


def web_token(state_dir: Path) -> str:
    """The token a browser or a scraper shows: made once, kept 0600 in the state folder, its account's alone."""
    path = state_dir / "web-token"
    if not path.exists():
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(descriptor, "w") as file:
            file.write(secrets.token_urlsafe(24))
    return path.read_text().strip()


class WebServer:
    """The child process serving HTTP at ``bind``; it ends with the master."""

    def __init__(self, bind: str, viewer: str, state_dir: Path, quantum_ms: int, log_level: str) -> None:
        self.bind = bind
        token = web_token(state_dir)
        self._process = subprocess.Popen(
            [sys.executable, "-m", "gangsched.web", "--bind", bind, "--master", viewer,
             "--quantum-ms", str(quantum_ms), "--parent", str(os.getpid()), "--log-level", log_level,
             "--address-file", str(state_dir / WEB_ADDRESS_FILE)],
            env={**os.environ, "GANG_WEB_TOKEN": token}, stdin=subprocess.DEVNULL,
        )
        log.info("metrics and web view at http://%s/ (pid %d; its token in %s)",
                 bind, self._process.pid, state_dir / "web-token")

    def stop(self) -> None:
        self._process.terminate()
        try:
            self._process.wait(_STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            self._process.kill()
            self._process.wait()
