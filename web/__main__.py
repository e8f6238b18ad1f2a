"""``python -m gangsched.web``: the server the master starts with ``--http-bind`` (master/viewer.py)."""

import argparse
import logging
import os
from pathlib import Path

import uvicorn

from gangsched.daemon.endpoints import write_atomically
from gangsched.daemon.logs import setup_logging
from gangsched.web.app import create_app
from gangsched.web.server import ViewServer
from gangsched.web.watch import ClusterWatch


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m gangsched.web", description=__doc__)
    parser.add_argument("--bind", required=True, help="HOST:PORT")
    parser.add_argument("--master", required=True, help="the master's viewer endpoint")
    parser.add_argument("--quantum-ms", type=int, default=1000)
    parser.add_argument("--parent", type=int, help="end when this process (the master) ends")
    parser.add_argument("--log-level", default="INFO")
    parser.add_argument("--address-file", type=Path, help="where to write the HOST:PORT bound (--bind with port 0)")
    arguments = parser.parse_args()
    log = setup_logging("web", arguments.log_level)
    host, _, port = arguments.bind.rpartition(":")
    host = host.strip("[]")
    token = os.environ.get("GANG_WEB_TOKEN")
    if not token:  # loopback too: every account of the machine reaches it
        raise SystemExit("the web view needs a token in GANG_WEB_TOKEN")
    server: ViewServer | None = None

    def stop() -> None:
        if server is not None:
            server.end()

    app = create_app(ClusterWatch(arguments.master, arguments.quantum_ms), token, host, arguments.parent, stop)
    server = ViewServer(uvicorn.Config(app, host=host, port=int(port), log_level="warning", access_log=False,
                                       timeout_graceful_shutdown=1, lifespan="on"),
                        bound=lambda address: _bound(address, arguments.address_file, log))
    server.run()


def _bound(address: str, address_file: Path | None, log: logging.Logger) -> None:
    log.info("serving http://%s/", address)
    if address_file is not None:
        write_atomically(address_file, address + "\n")


if __name__ == "__main__":
    main()
