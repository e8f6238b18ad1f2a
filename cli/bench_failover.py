"""`gang bench failover`: the lead taken over again and again between two masters on a PostgreSQL
store of the benchmark's own, while clients submit and a gang runs (bench/failover.py)."""

import tempfile
from pathlib import Path
from typing import Any

import click

from gangsched.cli.bench_output import print_figures, print_rows
from gangsched.cli.options import cluster_config, cluster_options
from gangsched.deploy.local import temporary_local_cluster


@click.command()
@click.option("--runs", type=click.IntRange(min=1), default=20, show_default=True, help="faults, the kinds in turn")
@click.option("--faults", default="kill,stop,takeover", show_default=True,
              help="kill: the leader killed -9; stop: SIGSTOP (continued once another leads); takeover: "
              "gang admin takeover")
@click.option("--submissions", type=click.IntRange(min=0), default=1000, show_default=True,
              help="one-task jobs submitted across the runs")
@click.option("--clients", type=click.IntRange(min=1), default=8, show_default=True, help="submitting in parallel")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None,
              help="write each takeover here")
@cluster_options
def failover(runs: int, faults: str, submissions: int, clients: int, csv_path: Path | None, **shape: Any) -> None:
    """Takeovers between two masters: the leader killed, stopped or handed over."""
    from gangsched.bench.failover import FAULTS, postgres_server, run_failover, summary

    kinds = [kind.strip() for kind in faults.split(",") if kind.strip()]
    if not kinds or any(kind not in FAULTS for kind in kinds):
        raise click.UsageError(f"--faults: a comma-separated list of {', '.join(FAULTS)}")
    config = cluster_config(**shape)
    with tempfile.TemporaryDirectory(prefix="gang-failover-") as folder:
        try:
            with postgres_server(Path(folder)) as url:
                with temporary_local_cluster(config.replace(store=url, masters=2)) as cluster:
                    result = run_failover(cluster, runs, kinds, submissions, clients)
        except (RuntimeError, TimeoutError) as error:
            raise click.ClickException(str(error)) from None
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
