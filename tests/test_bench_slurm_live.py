"""`gang bench slurm` runs whole, as its figures are taken: the commands under Slurm's names against a fresh
local cluster, a thousand held array jobs listed, and arrays through sbatch and gang submit to their ends."""

import subprocess
import sys

import pytest

pytestmark = pytest.mark.live


def test_the_slurm_benchmark_prints_every_row(tmp_path):
    csv = tmp_path / "slurm.csv"
    done = subprocess.run([sys.executable, "-m", "gangsched.cli", "bench", "slurm", "--runs", "1", "--arrays", "1",
                           "--csv", str(csv)], capture_output=True, text=True, timeout=300,
                          env={"COLUMNS": "200", "PATH": "/usr/bin:/bin"})
    assert done.returncode == 0, done.stderr[-2000:]
    for row in ("gangsched sbatch --wrap=true", "gangsched squeue -j JOB", "gangsched sacct -X -j JOB",
                "gangsched squeue -r (1000 pending)", "gangsched sbatch: 1 arrays", "gang submit -a: 1 arrays"):
        assert row in done.stdout, row
    assert csv.read_text().count("\n") == 7, "the interpreter, gang submit, three commands and the listing"
