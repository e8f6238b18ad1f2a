"""MPI jobs as the live tests submit them."""

import getpass

from gangsched.protocol.records import JobSpec, MpiKind


def mpi_job(argv: list[str], tasks: int, **placement: int) -> JobSpec:
    return JobSpec(name="mpi", user=getpass.getuser(), tasks=tasks, mpi=MpiKind.PMI1, argv=argv, cwd="/",
                   **placement)
