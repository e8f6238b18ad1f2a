"""A PostgreSQL server of one's own in a folder (Debian's ``postgresql`` package: ``initdb``, ``pg_ctl``),
for the tests, and for a local cluster whose masters share a store. It listens on a Unix socket in
its folder, and on the network only where an address is given (a test's masters in network
namespaces of their own reach it there); it runs as an unprivileged account where this process is
root (PostgreSQL refuses to run as root)."""

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from gangsched.deploy.unix_accounts import unix_account

SERVER_ACCOUNT = "postgres"  # Debian's package makes it; else made here
DATABASE_USER = "gangsched"
_PORT = 5432  # the socket's name: only this folder holds it


def postgres_tools() -> Path | None:
    """The folder of the newest PostgreSQL's initdb and pg_ctl, None if it is not installed."""
    found = shutil.which("initdb")
    if found is not None:
        return Path(found).resolve().parent
    installed = sorted(Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda path: int(path.parts[-3]))
    return installed[-1].parent if installed else None


@dataclass(frozen=True)
class PostgresServer:
    folder: Path
    address: str = ""  # an address it also listens on, trusting the /24 around it; empty: none

    @property
    def url(self) -> str:
        return f"postgresql://{DATABASE_USER}@/postgres?host={self.address or self.folder}&port={_PORT}"

    def start(self, tools: Path) -> None:
        """Made (initdb, the first time) and started, waiting until it takes connections."""
        data = self.folder / "data"
        run_as = self._account()
        self.folder.mkdir(parents=True, exist_ok=True)
        if run_as is not None:
            os.chown(self.folder, run_as.pw_uid, run_as.pw_gid)
        if not data.exists():
            self._run(run_as, [str(tools / "initdb"), "-D", str(data), "-A", "trust", "-U", DATABASE_USER,
                               "--no-sync"])
            if self.address:
                network = ".".join(self.address.split(".")[:3]) + ".0/24"
                with open(data / "pg_hba.conf", "a") as rules:
                    rules.write(f"host all all {network} trust\n")
        self._run(run_as, [str(tools / "pg_ctl"), "-D", str(data), "-l", str(self.folder / "server.log"), "-w",
                           "-o", f"-k {self.folder} -h '{self.address}' -p {_PORT}", "start"])

    def stop(self, tools: Path) -> None:
        self._run(self._account(), [str(tools / "pg_ctl"), "-D", str(self.folder / "data"), "-m", "fast", "-w",
                                    "stop"])

    @staticmethod
    def _account() -> pwd.struct_passwd | None:
        """Whom the server runs as: this process's account, or, for root, an unprivileged one."""
        if os.geteuid() != 0:
            return None
        found = unix_account(SERVER_ACCOUNT)
        assert found is not None  # root makes it where it is missing
        return found[0]

    @staticmethod
    def _run(account: pwd.struct_passwd | None, command: list[str]) -> None:
        environment = {"PATH": "/usr/bin:/bin", "LANG": "C.UTF-8"}
        if account is None:
            subprocess.run(command, check=True, capture_output=True, cwd="/", env=environment)
            return
        subprocess.run(command, check=True, capture_output=True, cwd="/", env=environment, user=account.pw_uid,
                       group=account.pw_gid, extra_groups=[])


@contextmanager
def running(folder: Path, address: str = "") -> Iterator[PostgresServer]:
    """A server of one's own in ``folder`` (made, and opened to the server's account), also on ``address``
    if given, stopped afterwards; RuntimeError where PostgreSQL is not installed."""
    tools = postgres_tools()
    if tools is None:
        raise RuntimeError("masters that share a store need PostgreSQL: apt-get install postgresql")
    folder.mkdir(parents=True, exist_ok=True)
    folder.chmod(0o755)  # the server's account, where root runs it, enters it
    server = PostgresServer(folder / "server", address)
    server.start(tools)
    try:
        yield server
    finally:
        server.stop(tools)
