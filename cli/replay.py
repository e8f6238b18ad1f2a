"""`gang replay`: a trace on a fresh live cluster, beside the simulator's prediction of the same run."""

from pathlib import Path
from typing import Any

import click
from rich.progress import Progress
from rich.table import Table

from gangsched.cli.bench import _cluster
from gangsched.cli.cluster import DOCKER
from gangsched.cli.console import command_console
from gangsched.cli.options import cluster_config, cluster_options
from gangsched.cli.sim import read_trace
from gangsched.jobs.synthetic import SyntheticJob
from gangsched.sim.metrics import Summary, summarize
from gangsched.sim.output import write_jobs, write_schedule
from gangsched.sim.sim_job import SimJob

console = command_console()


@click.command()
@click.argument("trace", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--speedup", type=click.FloatRange(min=0, min_open=True), default=100.0, show_default=True,
              help="arrivals, run times and estimates divided by this")
@click.option("--jobs", "count", type=click.IntRange(min=1), default=40, show_default=True,
              help="jobs of the trace to replay")
@click.option("--skip", type=click.IntRange(min=0), default=0, show_default=True, help="trace jobs to skip first")
@click.option("--load", type=click.FloatRange(min=0, min_open=True), default=None,
              help="rescale the window's arrivals to offer this load [as recorded]")
@click.option("--min-run-s", type=click.FloatRange(min=0), default=2.0, show_default=True,
              help="shortest scaled run time: a task takes tenths of a second to start and end")
@click.option("--procs", type=int, default=None, help="the trace's machine size [its header's MaxProcs]")
@click.option("--utilization", type=str, default="5-95", show_default=True,
              help="paired or local runs: the jobs' CPU utilization in %, one value or LO-HI drawn for each job")
@click.option("--out", type=click.Path(file_okay=False, path_type=Path), default=Path("replay"),
              show_default=True, help="where the schedules (SWF) and per-job CSVs go")
@DOCKER
@cluster_options
def replay(trace: Path, speedup: float, count: int, skip: int, load: float | None, min_run_s: float,
           procs: int | None, utilization: str, out: Path, docker: bool, **shape: Any) -> None:
    """Replay a trace on a fresh cluster and print its metrics beside the simulator's for the same run."""
    from gangsched.bench.replay import replay as run_replay
    from gangsched.bench.replay import scaled_jobs, timed_program, with_utilizations
    from gangsched.bench.twin import ProgramCost, by_quanta, compute_program, measure_program, simulate_twin

    low, high = _utilization_range(utilization)
    records, machine = read_trace(trace, procs)
    config = cluster_config(**shape)
    try:
        jobs = scaled_jobs(records, machine, config.nodes, speedup, count, skip, load, min_run_s)
    except ValueError as error:
        raise click.ClickException(str(error)) from None
    fine_grained = by_quanta(config)  # what runs together depends on the CPU the jobs use
    if fine_grained:
        jobs = with_utilizations(jobs, low, high)
    span = max(job.submit for job in jobs)
    console.print(f"{len(jobs)} jobs of {trace.name} on {config.nodes} nodes, {config.policy} MPL {config.mpl}, "
                  f"arrivals over {span:.0f} s")
    with _cluster(config, docker) as client, Progress(console=console, transient=True) as bar:
        cost: ProgramCost | None = None
        if fine_grained:
            bar.add_task("measuring the program alone", total=None)
            cost = measure_program(client, config)
        task = bar.add_task("replaying", total=len(jobs))
        share = min(node.cpu_share / node.processors for node in client.nodes())

        def program(job: SimJob) -> SyntheticJob:
            return compute_program(job.run_time, job.utilization, share) if fine_grained else timed_program(job)

        replayed = run_replay(client, jobs, program, progress=lambda done: bar.advance(task, done))
    live = [each.job for each in replayed]
    simulated = simulate_twin(config, jobs, cost)
    out.mkdir(parents=True, exist_ok=True)
    for name, schedule in (("live", live), ("sim", simulated)):
        write_jobs(out / f"replay-{name}.csv", schedule)
        write_schedule(out / f"replay-{name}.swf", schedule, config.nodes, f"gang replay of {trace.name}: {name}")
    unfinished = [each.info for each in replayed if each.job.end is None]
    if cost is not None:
        console.print(f"the program alone: {cost} beyond its computing and waiting (the simulation counts them)")
    console.print(_comparison(summarize(live, config.nodes), summarize(simulated, config.nodes)))
    for info in unfinished:
        console.print(f"job {info.job_id} ended {info.state.value.upper()}: {info.reason}")
    console.print(f"wrote {out}/replay-live.swf, replay-sim.swf and their CSVs")


def _utilization_range(text: str) -> tuple[float, float]:
    low, _, high = text.partition("-")
    try:
        bounds = float(low), float(high or low)
    except ValueError:
        raise click.BadParameter(f"{text!r} is not PCT or LO-HI", param_hint="--utilization") from None
    if not 0 < bounds[0] <= bounds[1] <= 100:
        raise click.BadParameter(f"{text!r}: 0 < LO <= HI <= 100", param_hint="--utilization")
    return bounds


def _comparison(live: Summary, simulated: Summary) -> Table:
    table = Table(title="live run vs the simulator's prediction")
    for column in ("metric", "live", "simulated", "difference"):
        table.add_column(column, justify="right")
    for name, ours, predicted in [
        ("jobs completed", live.jobs, simulated.jobs),
        ("mean wait (s)", live.wait.mean, simulated.wait.mean),
        ("mean response (s)", live.response.mean, simulated.response.mean),
        ("mean bounded slowdown", live.bounded_slowdown.mean, simulated.bounded_slowdown.mean),
        ("utilization", live.utilization, simulated.utilization),
    ]:
        difference = f"{(ours - predicted) / predicted:+.1%}" if predicted else "-"
        table.add_row(name, f"{ours:.2f}", f"{predicted:.2f}", difference)
    return table

