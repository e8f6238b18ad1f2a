"""What the tests need from Debian, installed where missing."""

import shutil
import subprocess


class DebianPackages:
    """What the tests need from Debian (chromium, prometheus, Slurm's PMI-2 library), installed where
    missing: the tests run as root in CI and install what they need, with one package-list update a
    session."""

    def __init__(self) -> None:
        self._updated = False

    def install(self, package: str) -> None:
        if not self._updated:
            subprocess.run(["apt-get", "update", "-qq"], check=True)
            self._updated = True
        subprocess.run(["apt-get", "install", "-y", "-qq", package], check=True, capture_output=True,
                       env={"DEBIAN_FRONTEND": "noninteractive", "PATH": "/usr/sbin:/usr/bin:/sbin:/bin"})

    def tool(self, command: str, package: str) -> str:
        """The path of ``command``, installing ``package`` first where it is missing."""
        found = shutil.which(command)
        if found is None:
            self.install(package)
            found = shutil.which(command)
        assert found is not None, f"{package} did not bring {command}"
        return found
