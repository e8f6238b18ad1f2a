"""`gang bench slurm`: Slurm's commands under their names, timed as whole processes and as a flood of array
jobs, side by side with a real Slurm where ``--slurm-conf`` names one (bench/slurm_commands.py)."""

import os
import subprocess
import sys
import tempfile
from pathlib import Path

import click

from gangsched.cli.bench_output import print_rows
from gangsched.deploy.config import ClusterConfig


@click.command("slurm")
@click.option("--runs", type=click.IntRange(min=1), default=10, show_default=True, help="runs of each command")
@click.option("--arrays", type=click.IntRange(min=1), default=10, show_default=True,
              help="arrays of a thousand jobs: held for `squeue -r`, then of /bin/true for the rate")
@click.option("--slurm-conf", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="a real Slurm's slurm.conf (its commands in /usr/bin), measured beside gangsched's")
@click.option("--slurm-arrays", type=click.IntRange(min=0), default=1, show_default=True,
              help="arrays of a thousand /bin/true through the real Slurm (a few jobs a second)")
@click.option("--steps", type=click.IntRange(min=1), default=30, show_default=True,
              help="srun -n 4 true timed one at a time inside an allocation of 2 nodes x 2, then 100 in a row")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the rows here")
def slurm(runs: int, arrays: int, slurm_conf: Path | None, slurm_arrays: int, steps: int,
          csv_path: Path | None) -> None:
    """sbatch, squeue and sacct as whole processes, squeue -r of held arrays, and arrays through sbatch: on
    a fresh local cluster of 4 nodes of 2 processors, beside a real Slurm's; and srun's steps inside an
    allocation."""
    from gangsched.bench.slurm_commands import ARRAY, Peer, array_rate, held_listing, latencies, step_figures
    from gangsched.deploy.local import temporary_cluster

    peer = None if slurm_conf is None else Peer(slurm_conf)
    config = ClusterConfig(nodes=4, processors_per_node=2, quantum_ms=100)
    with temporary_cluster(config) as client, tempfile.TemporaryDirectory(prefix="gang-bench-") as folder:
        ours = Path(folder) / "bin"
        subprocess.run([sys.executable, "-m", "gangsched.cli", "slurm", "install", str(ours)], check=True,
                       capture_output=True)
        environment = {name: value for name, value in os.environ.items() if name != "PYTHONDONTWRITEBYTECODE"}
        environment["GANG_MASTER"] = client.endpoint

        def run(*command: str) -> str:
            return subprocess.run([str(ours / command[0]), *command[1:]], env=environment, capture_output=True,
                                  text=True, check=True, cwd=folder).stdout

        def active() -> int:
            return sum(count.count for count in client.job_counts() if not count.state.is_final)

        job = int(run("sbatch", "--parsable", "--wrap=sleep 600").split(";")[0])
        peer_job = None if peer is None else int(peer.run("sbatch", "--parsable", "-o", "/dev/null",
                                                          "--wrap=sleep 600").split(";")[0])
        rows = latencies(ours, environment, peer, runs, job, peer_job)
        run("scancel", str(job))
        if peer is not None:
            peer.run("scancel", str(peer_job))
        rows += held_listing(ours, environment, peer, arrays, runs)
        print_rows(f"whole-process latency, median of {runs}", rows, csv_path)
        step_environment = {**environment, "PATH": f"{ours}{os.pathsep}{environment.get('PATH', '')}"}
        print_rows("srun -n 4 true inside an allocation of 2 nodes x 2: from its start to its exit",
                   step_figures(ours, step_environment, peer, steps, 100), None)
        gang = str(Path(sys.executable).with_name("gang"))
        jobs = arrays * 1000
        rates = [
            array_rate(lambda: [run("sbatch", "-o", "/dev/null", f"--array={ARRAY}", "--wrap=/bin/true")
                                for _ in range(arrays)], active, jobs, f"gangsched sbatch: {arrays} arrays"),
            array_rate(lambda: [subprocess.run([gang, "submit", "-a", ARRAY, "-o", "/dev/null", "--", "/bin/true"],
                                               env=environment, check=True, capture_output=True)
                                for _ in range(arrays)], active, jobs, f"gang submit -a: {arrays} arrays"),
        ]
        if peer is not None and slurm_arrays:
            rates.append(array_rate(
                lambda: [peer.run("sbatch", "-o", "/dev/null", f"--array={ARRAY}", "--wrap=/bin/true")
                         for _ in range(slurm_arrays)],
                lambda: len(peer.run("squeue", "-h", "-r").splitlines()), slurm_arrays * 1000,
                f"Slurm sbatch: {slurm_arrays} arrays"))
    print_rows("arrays of /bin/true, first submission to the last end", rates, None)
