"""`gang sim`: run a policy over a trace or a model workload and print the metrics."""

import csv
import dataclasses
from collections.abc import Callable
from pathlib import Path

import click
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from gangsched.policy.backfill import ConservativePolicy, EasyPolicy, FcfsPolicy
from gangsched.policy.interface import Policy
from gangsched.sim.engine import simulate
from gangsched.sim.jobs import SimJob
from gangsched.sim.metrics import Stat, Summary, summarize
from gangsched.sim.prepare import prepare
from gangsched.workload.downey import DowneyParameters, downey_jobs
from gangsched.workload.estimates import beta_estimates
from gangsched.workload.lublin import lublin_jobs
from gangsched.workload.scaling import at_load
from gangsched.workload.swf import SwfJob, modelled_job, read_swf, write_swf

console = Console()
POLICIES: dict[str, Callable[[int], Policy]] = {
    "fcfs": FcfsPolicy, "easy": EasyPolicy, "conservative": ConservativePolicy,
}


@click.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path), required=False)
@click.option("--policy", type=click.Choice(sorted(POLICIES)), default="easy", show_default=True)
@click.option("--procs", type=click.IntRange(min=1), default=None,
              help="machine size [the trace's MaxProcs/MaxNodes; 128 for models]")
@click.option("--model", type=click.Choice(["lublin", "downey"]), default=None,
              help="generate the workload instead of reading a trace")
@click.option("--jobs", "count", type=click.IntRange(min=1), default=10_000, show_default=True,
              help="jobs to generate")
@click.option("--load", type=click.FloatRange(min=0, min_open=True), default=None,
              help="rescale arrivals to this offered load")
@click.option("--beta", type=click.FloatRange(0, 1), default=None, help="β-model estimates")
@click.option("--seed", type=int, default=1, show_default=True)
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="per-job CSV")
@click.option("--swf-out", type=click.Path(path_type=Path), default=None, help="the schedule as SWF")
def sim(trace: Path | None, policy: str, procs: int | None, model: str | None, count: int,
        load: float | None, beta: float | None, seed: int, csv_path: Path | None,
        swf_out: Path | None) -> None:
    """Simulate a policy over a trace (SWF, gzip or plain) or a model workload."""
    if (trace is None) == (model is None):
        raise click.UsageError("give a TRACE or --model, not both")
    records, procs = _workload(trace, model, count, procs, seed)
    if load is not None:
        records = at_load(records, procs, load)
    if beta is not None:
        records = beta_estimates(records, beta, seed)
    prepared = prepare(records, procs)
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"{policy} on {procs} procs", total=len(prepared.jobs))
        finished = 0

        def advance(done: int) -> None:
            nonlocal finished
            finished += done
            if finished % 500 == 0:  # a redraw per job would cost more than the simulation
                bar.update(task, completed=finished)

        simulate(prepared.jobs, POLICIES[policy](procs), advance)
    console.print(_table(summarize(prepared.jobs, procs), policy, procs))
    for what, how_many in sorted(prepared.awkward.items()):
        console.print(f"  {how_many:>6}  {what}")
    if csv_path:
        with open(csv_path, "w", newline="") as file:
            writer = csv.writer(file)
            writer.writerow(["job_id", "submit", "start", "end", "wait", "procs", "run_time", "estimate"])
            for job in prepared.jobs:
                writer.writerow([job.job_id, job.submit, job.start, job.end,
                                 None if job.start is None else job.start - job.submit,
                                 job.procs, job.run_time, job.estimate])
    if swf_out:
        write_swf(swf_out, [_scheduled(job) for job in prepared.jobs],
                  [f"; MaxProcs: {procs}", f"; Note: scheduled by gangsched {policy}"])


def _workload(trace: Path | None, model: str | None, count: int, procs: int | None,
              seed: int) -> tuple[list[SwfJob], int]:
    if trace is not None:
        loaded = read_swf(trace)
        size = procs or loaded.max_procs()
        if size is None:
            raise click.UsageError(f"{trace} names no MaxProcs/MaxNodes: give --procs")
        return loaded.jobs, size
    size = procs or 128
    if model == "lublin":
        return lublin_jobs(count, size, seed), size
    return downey_jobs(count, 0.7, seed, DowneyParameters(procs=size)), size


def _scheduled(job: SimJob) -> SwfJob:
    """The job as the schedule ran it: its wait filled in."""
    wait = -1.0 if job.start is None else round(job.start - job.submit, 2)
    record = modelled_job(job.job_id, job.submit, job.run_time, job.procs)
    return dataclasses.replace(record, wait=wait, req_time=job.estimate)


def _table(summary: Summary, policy: str, procs: int) -> Table:
    table = Table(title=f"{policy}, {procs} procs: {summary.jobs} jobs, "
                        f"utilization {summary.utilization:.3f}, {summary.unfinished} unfinished")
    for column in ("jobs", "n", "wait (s)", "response (s)", "bounded slowdown"):
        table.add_column(column, justify="right")
    table.add_row("all", str(summary.jobs), _pm(summary.wait), _pm(summary.response),
                  _pm(summary.bounded_slowdown))
    for name, (n, waits, slowdowns) in summary.by_group.items():
        table.add_row(name, str(n), _pm(waits), "", _pm(slowdowns))
    return table


def _pm(stat: Stat) -> str:
    return f"{stat.mean:,.1f} ± {stat.sd:,.1f}"
