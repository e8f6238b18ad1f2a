"""`gang bench alone` and `gang bench startup`: how each MPI library's jobs run and start under gangsched."""

import tempfile
from pathlib import Path

import click

from gangsched.cli.bench_output import console, print_rows
from gangsched.jobs.mpi_environments import LIBRARIES


@click.command()
@click.option("--mpi-library", "library_name", type=click.Choice(LIBRARIES), default="openmpi",
              show_default=True, help="the MPI library, in an environment of its own (docs/mpi.md)")
@click.option("--nodes", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--processors-per-node", "processors", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--iterations", type=click.IntRange(min=1), default=10_000, show_default=True)
@click.option("--grain-ms", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="CPU time between allreduces")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
def alone(library_name: str, nodes: int, processors: int, iterations: int, grain_ms: float,
          csv_path: Path | None) -> None:
    """One MPI job (allreduce.c) alone on a fresh cluster under strict gang scheduling, against the
    library's own launcher with as many ranks on the same cores: results and iterations/s."""
    from gangsched.bench.mpi_libraries import measure_alone, mpi_library

    library = mpi_library(library_name)
    with tempfile.TemporaryDirectory(prefix="gang-alone-") as folder:
        row = measure_alone(library, library.build("allreduce", Path(folder)), nodes, processors, iterations,
                            grain_ms)
    print_rows(f"{library.name}: one job of {iterations:,} allreduces ({grain_ms:g} ms grain) alone, "
                f"{nodes} nodes x {processors} processors", [row], csv_path)


@click.command()
@click.option("--mpi-library", "libraries", default="mpich,openmpi,intelmpi", show_default=True,
              help="MPI libraries, comma-separated, each in an environment of its own (docs/mpi.md)")
@click.option("--jobs", type=click.IntRange(min=1), default=5, show_default=True, help="jobs per shape: the median")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
def startup(libraries: str, jobs: int, csv_path: Path | None) -> None:
    """MPI start-up: submission until every rank is past MPI_Init, per library, for 4 and 16 ranks."""
    from gangsched.bench.mpi_libraries import measure_startup, mpi_library, startup_shapes

    rows = []
    with tempfile.TemporaryDirectory(prefix="gang-startup-") as folder:
        for name in libraries.split(","):
            library = mpi_library(name.strip())
            binary = library.build("allreduce", Path(folder))
            for nodes, processors in startup_shapes(library):
                rows.append(measure_startup(library, binary, nodes, processors, jobs))
                console.print(f"{library.name}: {nodes * processors} ranks measured")
    print_rows(f"MPI start-up, submission to every rank past MPI_Init (median of {jobs})", rows, csv_path)
