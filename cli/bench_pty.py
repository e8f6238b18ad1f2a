"""`gang bench pty`: the time from a key to its echo in an interactive shell, a local one beside srun --pty's on
a gang-scheduled cluster, alone and sharing its processor with another row (bench/terminal_echo.py)."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import click

from gangsched.cli.bench_output import print_rows
from gangsched.deploy.config import ClusterConfig

# a job that keeps its processor busy for as long as the benchmark runs, in a row of its own
_BUSY = ["sh", "-c", "while :; do :; done"]


@click.command("pty")
@click.option("--keys", type=click.IntRange(min=1), default=200, show_default=True, help="keys typed into each shell")
@click.option("--quantum-ms", type=click.IntRange(min=10), default=100, show_default=True,
              help="the cluster's time slice")
@click.option("--slurm-conf", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="a real Slurm's slurm.conf (its srun in /usr/bin): its srun --pty bash beside gangsched's")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the rows here")
def pty(keys: int, quantum_ms: int, slurm_conf: Path | None, csv_path: Path | None) -> None:
    """A key's echo from a local bash, from srun --pty bash on a fresh local cluster of one node of one
    processor (alone, then alternating with a busy job of another row), and from a real Slurm's srun --pty."""
    from gangsched.bench.slurm_commands import SLURM_BIN
    from gangsched.bench.terminal_echo import echo_latencies, figures, local_shell, srun_shell
    from gangsched.deploy.local import temporary_cluster

    environment = {name: value for name, value in os.environ.items() if not name.startswith("SLURM_")}
    rows = [figures("local bash", echo_latencies(local_shell(), environment, keys))]
    config = ClusterConfig(nodes=1, processors_per_node=1, quantum_ms=quantum_ms)
    with temporary_cluster(config) as client, tempfile.TemporaryDirectory(prefix="gang-bench-") as folder:
        ours = Path(folder) / "bin"
        subprocess.run([sys.executable, "-m", "gangsched.cli", "slurm", "install", str(ours)], check=True,
                       capture_output=True)
        ours_environment = {**environment, "GANG_MASTER": client.endpoint}
        rows.append(figures("srun --pty bash, no other row", echo_latencies(srun_shell(ours / "srun"),
                                                                           ours_environment, keys)))
        gang = str(Path(sys.executable).with_name("gang"))
        subprocess.run([gang, "submit", "-o", "/dev/null", "--", *_BUSY], env=ours_environment, check=True,
                       capture_output=True)
        deadline = time.monotonic() + 60
        while not any(job.state.value == "running" for job in client.jobs()):
            if time.monotonic() > deadline:
                raise click.ClickException("the busy job did not start within 60 s")
            time.sleep(0.1)
        rows.append(figures(f"srun --pty bash, alternating at {quantum_ms} ms",
                            echo_latencies(srun_shell(ours / "srun"), ours_environment, keys)))
        subprocess.run([str(ours / "scancel"), "--user", os.environ.get("USER", "root")], env=ours_environment,
                       capture_output=True)
    if slurm_conf is not None:
        rows.append(figures("Slurm srun --pty bash, no other job", echo_latencies(
            srun_shell(SLURM_BIN / "srun"), {**environment, "SLURM_CONF": str(slurm_conf)}, keys)))
    print_rows("a key typed to its echo, in raw mode", rows, csv_path)
