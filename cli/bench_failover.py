"""`gang bench failover`: the lead taken over again and again between two masters on a PostgreSQL
store of the benchmark's own, while clients submit and a gang runs (bench/failover.py)."""

import contextlib
import os
import subprocess
import tempfile
from pathlib import Path
from typing import Any

import click

from gangsched.cli.bench_output import print_figures, print_rows
from gangsched.cli.options import cluster_config, cluster_options
from gangsched.deploy.local import temporary_local_cluster


@click.command()
@click.option("--runs", type=click.IntRange(min=1), default=20, show_default=True, help="faults, the kinds in turn")
@click.option("--faults", default=None,
              help="kill: the leader killed -9; stop: SIGSTOP (continued once another leads); cut: its link "
              "taken down (root: the first master runs in a network namespace of its own); takeover: gang admin "
              "takeover [default: all, cut only for root]")
@click.option("--submissions", type=click.IntRange(min=0), default=1000, show_default=True,
              help="one-task jobs submitted across the runs")
@click.option("--clients", type=click.IntRange(min=1), default=8, show_default=True, help="submitting in parallel")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None,
              help="write each takeover here")
@cluster_options
def failover(runs: int, faults: str | None, submissions: int, clients: int, csv_path: Path | None,
             **shape: Any) -> None:
    """Takeovers between two masters: the leader killed, stopped, cut off or handed over."""
    from gangsched.bench.failover import FAULTS, run_failover, summary
    from gangsched.bench.isolation import shared_store
    from gangsched.deploy.local import ClusterError

    default = [kind for kind in FAULTS if kind != "cut" or os.geteuid() == 0]
    kinds = default if faults is None else [kind.strip() for kind in faults.split(",") if kind.strip()]
    if not kinds or any(kind not in FAULTS for kind in kinds):
        raise click.UsageError(f"--faults: a comma-separated list of {', '.join(FAULTS)}")
    config = cluster_config(**shape).replace(masters=2)
    with tempfile.TemporaryDirectory(prefix="gang-failover-") as folder, contextlib.ExitStack() as stack:
        try:
            shared, namespace = stack.enter_context(shared_store(config, Path(folder), cut="cut" in kinds))
            cluster = stack.enter_context(temporary_local_cluster(
                shared, None if namespace is None else namespace.confinement()))
            result = run_failover(cluster, runs, kinds, submissions, clients, namespace)
        except (RuntimeError, TimeoutError, PermissionError, ClusterError) as error:
            raise click.ClickException(str(error)) from None
        except subprocess.CalledProcessError as error:  # the PostgreSQL server or the namespace could not be made
            raise click.ClickException(f"{' '.join(error.cmd)} failed: {(error.stderr or b'').decode().strip()}") \
                from None
    print_rows(f"takeover: from the fault to the new leader's first switch ({config.nodes} nodes, quantum "
               f"{config.quantum_ms} ms, lease {config.lease_s:g} s; gap: from the last switch before to the first "
               "after; gap and nodes back: medians)", summary(result.takeovers), None)
    if csv_path:
        from gangsched.cli.bench_output import write_rows_csv

        write_rows_csv(csv_path, [{"run": run, "fault": each.fault, "takeover_s": round(each.seconds, 4),
                                   "switch_gap_s": round(each.gap_s, 4), "nodes_back_s": round(each.nodes_back_s, 4)}
                                  for run, each in enumerate(result.takeovers, start=1)])
    print_figures("what clients and nodes saw", {
        "submissions": result.submissions, "accepted": result.accepted, "completed": result.completed,
        "lost": result.lost, "duplicates": result.duplicates,
        "longest submission (s)": round(result.longest_submission_s, 2),
        "gang ran on": result.gang_ran_on, "stale messages refused by nodes": result.stale_refused}, None)
