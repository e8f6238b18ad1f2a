"""`gang bench operations`: administrative commands beside submissions while the master is killed -9
(bench/operations_restarts.py)."""

from pathlib import Path
from typing import Any

import click

from gangsched.cli.bench_output import print_rows
from gangsched.cli.options import cluster_config, cluster_options
from gangsched.deploy.local import temporary_local_cluster


@click.command()
@click.option("--submissions", type=click.IntRange(min=4), default=1000, show_default=True,
              help="held jobs, each followed by one command on it")
@click.option("--clients", type=click.IntRange(min=1), default=8, show_default=True, help="working in parallel")
@click.option("--runs", type=click.IntRange(min=1), default=1, show_default=True)
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="write the results here")
@cluster_options
def operations(submissions: int, clients: int, runs: int, csv_path: Path | None, **shape: Any) -> None:
    """Commands and submissions from parallel clients, the master killed -9 halfway (root)."""
    from gangsched.bench.operations_restarts import run_operations_restart

    config = cluster_config(**shape)
    rows = []
    for run in range(1, runs + 1):
        with temporary_local_cluster(config) as cluster:
            try:
                result = run_operations_restart(cluster, submissions, clients)
            except PermissionError as error:
                raise click.ClickException(str(error)) from None
        rows.append({"run": run, "accepted": result.accepted, "commands": result.commands,
                     "recorded": result.recorded, "recorded_twice": result.recorded_twice,
                     "wrong_state": result.wrong_state, "lost": result.lost, "seconds": round(result.seconds, 1)})
    print_rows(f"{submissions} submissions and {submissions} commands from {clients} clients, master killed -9 "
               "halfway", rows, csv_path)
