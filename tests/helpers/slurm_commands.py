"""Slurm's commands as a tool runs them: from the folder `gang slurm install` puts them in, against a live
cluster's master."""

import os
import subprocess
import sys
from pathlib import Path

from tests.helpers.clusters import Cluster


def install_slurm_commands(folder: Path) -> Path:
    subprocess.run([sys.executable, "-m", "gangsched.cli", "slurm", "install", str(folder)], check=True,
                   capture_output=True)
    return folder


def command(cluster: Cluster, folder: Path, name: str, *arguments: str,
            cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """``name`` run from ``folder``, which is first on the PATH it and its jobs get (as a site installs the names:
    a batch script's srun is gangsched's, not a real Slurm's the host may have)."""
    return subprocess.run([str(folder / name), *arguments], capture_output=True, text=True, cwd=cwd,
                          env={**os.environ, "GANG_MASTER": cluster.client.endpoint, "COLUMNS": "200",
                               "PATH": f"{folder}{os.pathsep}{os.environ.get('PATH', '')}"})


def submitted(cluster: Cluster, folder: Path, *arguments: str, cwd: Path) -> int:
    """``sbatch --parsable ARGUMENTS`` run in ``cwd``: the job's id."""
    done = command(cluster, folder, "sbatch", "--parsable", *arguments, cwd=cwd)
    assert done.returncode == 0, done.stderr
    return int(done.stdout.split()[0])
