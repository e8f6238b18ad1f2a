"""`gang bench throughput`: small jobs a second, end to end, against the machine's floor."""

import shlex
from pathlib import Path

import click

from gangsched.cli.bench_output import console, print_figures, write_rows_csv
from gangsched.deploy.config import ClusterConfig


@click.command()
@click.option("--jobs", type=click.IntRange(min=1), default=10_000, show_default=True, help="one-task jobs")
@click.option("--arrays", type=click.IntRange(min=1), default=None,
              help="submitted as this many arrays [10, unless --clients]")
@click.option("--clients", type=click.IntRange(min=1), default=None,
              help="submitted as single jobs by this many clients in parallel instead")
@click.option("--command", default="/bin/true", show_default=True, help="each job's command")
@click.option("--output", default=None, metavar="PATTERN",
              help="each job's output, as `gang submit -o` takes it (/dev/null: none) [the node's spool]")
@click.option("--nodes", type=click.IntRange(min=1), default=4, show_default=True)
@click.option("--processors-per-node", "processors", type=click.IntRange(min=1), default=2, show_default=True)
@click.option("--quantum-ms", type=click.IntRange(min=10), default=100, show_default=True)
@click.option("--emulated-nodes", type=click.IntRange(min=1), default=None,
              help="a real master and this many emulated node daemons of one processor each, whose tasks end "
              "as soon as they run (no process started, no floor), instead of the local cluster")
@click.option("--docker", is_flag=True, help="on a fresh compose cluster (containers as nodes) instead")
@click.option("--store", default="", metavar="URL",
              help="the master keeps its jobs in this PostgreSQL database (postgresql://...) [SQLite in its folder]")
@click.option("--web", is_flag=True,
              help="with the master's web view running, as `gang cluster up` starts it (its reads of the master "
              "with no page open)")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None,
              help="the figures here, the queue's drain beside it (-drain.csv) and its plot (.png)")
def throughput(jobs: int, arrays: int | None, clients: int | None, command: str, output: str | None, nodes: int,
               processors: int, quantum_ms: int, emulated_nodes: int | None, docker: bool, store: str, web: bool,
               csv_path: Path | None) -> None:
    """N one-task jobs on a fresh local cluster, from the first submission until the last COMPLETED is
    written: jobs/s, the time of each phase, the master's CPU and memory, the switch during the flood
    against idle, and the rate against this machine's floor measured in the same run."""
    from gangsched.bench.throughput import measure_throughput, plot

    if arrays and clients:
        raise click.UsageError("--arrays or --clients, not both")
    if docker and emulated_nodes:
        raise click.UsageError("--docker or --emulated-nodes, not both")
    if store and (docker or emulated_nodes):
        raise click.UsageError("--store is for the local cluster")
    config = ClusterConfig(nodes=nodes, processors_per_node=processors, quantum_ms=quantum_ms,
                           http_bind="127.0.0.1:0" if web else "", store=store)
    where = f"{emulated_nodes} emulated nodes x 1 processor" if emulated_nodes else \
        f"{nodes} {'node containers' if docker else 'nodes'} x {processors} processors"
    console.print(f"{jobs:,} jobs of {command!r} on {where}, {quantum_ms} ms quanta")
    run = measure_throughput(config, jobs, None if clients else arrays or 10, clients, shlex.split(command),
                             emulated_nodes=emulated_nodes, docker=docker, store_url=store, output=output)
    print_figures("throughput, end to end", run.row(), csv_path)
    if csv_path:
        write_rows_csv(csv_path.with_name(f"{csv_path.stem}-drain.csv"), run.samples)
        plot(run, csv_path.with_suffix(".png"))
        console.print(f"wrote {csv_path.with_suffix('.png')}")
