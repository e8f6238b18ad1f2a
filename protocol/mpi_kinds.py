"""The process-manager interfaces a job's tasks may speak (Slurm's ``--mpi``), without a model's import: srun
reads them from its command line, and a command's start is the most of its time."""

from enum import StrEnum


class MpiKind(StrEnum):
    """The process-manager interface a job's tasks speak (Slurm's ``--mpi``)."""

    NONE = "none"  # the GANG_* variables only
    PMI1 = "pmi1"  # the simple PMI wire protocol, version 1, over the socket in PMI_FD (MPICH)
    PMI2 = "pmi2"  # the PMI-2 wire protocol over PMI_FD (Intel MPI with a PMI-2 client library)
    PMIX = "pmix"  # a PMIx server, OpenPMIx's, in each node daemon (Open MPI 5)
