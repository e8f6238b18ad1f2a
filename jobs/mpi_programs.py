"""The MPI programs shipped with gangsched, built with the MPI wheel's ``mpicc``.

``allreduce.c`` is the fine-grained program of the experiments and tests (see
its header). ``pip install 'gangsched[mpi]'`` brings MPICH (``mpicc``,
``libmpi``, ``mpiexec``) and mpi4py as ordinary wheels, beside this Python's
interpreter.
"""

import shutil
import subprocess
import sys
from pathlib import Path

SOURCES = Path(__file__).parent / "mpi"


class MpiUnavailable(Exception):
    pass


def mpi_tool(name: str) -> str:
    """``mpicc`` or ``mpiexec`` of this installation's MPI wheel (else the PATH's)."""
    beside = Path(sys.executable).parent / name
    found = str(beside) if beside.exists() else shutil.which(name)
    if found is None:
        raise MpiUnavailable(f"no {name}: install the MPI extra, pip install 'gangsched[mpi]'")
    return found


def programs() -> list[str]:
    return sorted(source.stem for source in SOURCES.glob("*.c"))


def build(program: str, folder: Path) -> Path:
    """Compile ``program`` (``allreduce``) into ``folder``, once; the path of the binary."""
    source = SOURCES / f"{program}.c"
    binary = folder / program
    if binary.exists() and binary.stat().st_mtime >= source.stat().st_mtime:
        return binary
    folder.mkdir(parents=True, exist_ok=True)
    built = subprocess.run([mpi_tool("mpicc"), "-O2", "-o", str(binary), str(source)],
                           capture_output=True, text=True)
    if built.returncode != 0:
        raise MpiUnavailable(f"mpicc failed on {source}: {built.stderr.strip()}")
    return binary


if __name__ == "__main__":  # python -m gangsched.jobs.mpi_programs FOLDER: build them all (the image does)
    for name in programs():
        print(build(name, Path(sys.argv[1])))
