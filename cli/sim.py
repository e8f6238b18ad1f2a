"""`gang sim`: run a policy over a trace or a model workload; `gang sim sweep`: a load sweep."""

import contextlib
import dataclasses
import functools
import gc
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from gangsched import traces
from gangsched.cli.param_types import SIZE
from gangsched.cli.sim_priority import fair_share_settings, priority_options
from gangsched.cli.table import Column, render
from gangsched.policy.catalog import POLICY_NAMES, Choice
from gangsched.policy.slack_settings import Heuristic, SlackSettings
from gangsched.sim.metrics import Stat, pyss_selection, summarize
from gangsched.sim.output import write_jobs, write_schedule
from gangsched.sim.prepare import prepare, prepare_as_pyss
from gangsched.sim.runner import Outcome, prioritize, run_keeping_jobs
from gangsched.workload.scaling import at_load, offered_load, scale_run_times
from gangsched.workload.swf import SwfError, SwfJob, read_swf


class TraceFile(click.ParamType):  # type: ignore[type-arg]  # generic only in type stubs
    """A trace file, or the name of a log shipped with gangsched (`gang sim KTH-SP2-1996-2.1-cln`)."""

    name = "trace"

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> Path:
        path = Path(str(value))
        if path.is_file():
            return path
        found = traces.find(str(value))
        if found is None:
            names = ", ".join(shipped.name.removesuffix(".swf.gz") for shipped in traces.shipped())
            self.fail(f"{value} is not a file nor a log shipped with gangsched ({names})", param, ctx)
        return found


TRACE = TraceFile()


class DefaultGroup(click.Group):
    """A group whose first argument, when it names no subcommand, goes to ``run``: `gang sim TRACE`."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        if not args or args[0] not in self.commands and args[0] not in ("-h", "--help"):
            args = ["run", *args]
        return super().parse_args(ctx, args)


@click.group(cls=DefaultGroup)
def sim() -> None:
    """Simulate policies over traces (SWF, gzip or plain) or model workloads.

    `gang sim TRACE` is `gang sim run TRACE`.
    """


def workload_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.argument("trace", type=TRACE, required=False),
        click.option("--model", type=click.Choice(["lublin", "downey", "hyper-erlang", "zhang2000"]), default=None,
                     help="generate the workload instead of reading a trace"),
        click.option("--model-params", type=click.Path(exists=True, dir_okay=False, path_type=Path),
                     default=None, help="hyper-erlang: its size classes as JSON (see the README)"),
        click.option("--jobs", "count", type=click.IntRange(min=1), default=10_000, show_default=True,
                     help="jobs to generate"),
        click.option("--procs", type=click.IntRange(min=1), default=None,
                     help="machine size [the trace's MaxProcs/MaxNodes; 320 for zhang2000, 128 for other models]"),
        click.option("--beta", type=click.FloatRange(0, 1), default=None, help="β-model estimates"),
        click.option("--seed", type=int, default=1, show_default=True),
    ]
    return functools.reduce(lambda wrapped, option: option(wrapped), reversed(options), command)


def policy_options(command: Callable[..., Any]) -> Callable[..., Any]:
    defaults = Choice()
    options = [
        click.option("--mpl", type=click.IntRange(min=1), default=defaults.mpl, show_default=True,
                     help="matrix policies: rows at most"),
        click.option("--reservation-depth", type=click.IntRange(min=1), default=defaults.reservation_depth,
                     show_default=True, help="bgs, mbgs: the first queued jobs that hold reservations and are tried "
                     "at each event"),
        click.option("--cs", "context_switch", type=click.FloatRange(0, 0.5), default=0.0, show_default=True,
                     help="context-switch overhead, a fraction of each slice"),
        click.option("--q", "migrate_per_slice", type=click.IntRange(min=0), default=None,
                     help="mgs/mbgs: tasks migrated per time slice at most [no limit]"),
        click.option("--migration-cost", "migration_cost_s", type=click.FloatRange(min=0), default=0.0,
                     show_default=True, help="mgs/mbgs: seconds of one checkpoint and restart (C)"),
        click.option("--alpha", type=click.FloatRange(0, 1), default=defaults.alpha, show_default=True,
                     help="gs-largeq: large means estimate > alpha × the longest estimate"),
        click.option("--jmax", "most_large", type=click.IntRange(min=1), default=defaults.most_large,
                     show_default=True, help="gs-largeq: large jobs sharing a processor at most"),
        click.option("--large-backfill/--large-fcfs", default=False, show_default=True,
                     help="gs-largeq: the large jobs' queue"),
        click.option("--sf", "slack_factor", type=click.FloatRange(min=0), default=defaults.slack.slack_factor,
                     show_default=True, help="slack: slack factor"),
        click.option("--awt", "average_wait_s", type=click.FloatRange(min=0, min_open=True),
                     default=defaults.slack.average_wait_s, show_default=True,
                     help="slack: the site's average wait time (s)"),
        click.option("--heuristic", type=click.Choice([h.value for h in Heuristic]), default="ast",
                     show_default=True, help="slack: the order delayed jobs are compressed in"),
        click.option("--memory-per-node", "memory_per_node", type=SIZE, default=None, metavar="SIZE",
                     help="each node's memory (its one processor's): jobs commit the log's requested memory "
                     "per processor, or its used memory (docs/memory.md) [memory not counted]"),
    ]
    return functools.reduce(lambda wrapped, option: option(wrapped), reversed(options), command)


def _choice(policy: str, given: dict[str, Any]) -> Choice:
    slack = SlackSettings(slack_factor=given.pop("slack_factor"), average_wait_s=given.pop("average_wait_s"),
                          heuristic=Heuristic(given.pop("heuristic")))
    return Choice(policy=policy, slack=slack, **given)


@sim.command("run")
@workload_options
@click.option("--policy", type=click.Choice(POLICY_NAMES), default="easy", show_default=True)
@policy_options
@click.option("--load", type=click.FloatRange(min=0, min_open=True), default=None,
              help="rescale arrivals to this offered load")
@click.option("--run-factor", type=click.FloatRange(min=0, min_open=True), default=None,
              help="multiply run times and estimates (Zhang et al. 2000's load factor)")
@click.option("--priority-every", type=click.IntRange(min=1), default=None,
              help="every N-th job gets user and political priority 1 (slack)")
@priority_options
@click.option("--as-pyss", is_flag=True,
              help="read the trace and average over the jobs as the pyss simulator does (docs/metrics.md)")
@click.option("--csv", "csv_path", type=click.Path(path_type=Path), default=None, help="per-job CSV")
@click.option("--swf-out", type=click.Path(path_type=Path), default=None, help="the schedule as SWF")
@click.option("--config", "config_file", type=click.Path(exists=True, dir_okay=False, path_type=Path), default=None,
              help="the partitions, tiers and preemption of a configuration file (docs/configuration.md) instead of "
                   "--policy: a job goes to the partition its SWF partition field numbers (1: the first), else the "
                   "default; the machine is the file's nodes, or --procs nodes named node1, node2, ...")
@click.option("--reservation", "reservations", multiple=True, metavar="NAME=NODELIST@START+DURATION",
              help="a maintenance window: no job runs on NODELIST from START (after the first submission) for "
                   "DURATION, both as Slurm's times (1-00:00:00+4:00:00); with it, the machine's nodes are named "
                   "node1, node2, ... or as --config names them")
def run_command(
    trace: Path | None,
    model: str | None,
    model_params: Path | None,
    count: int,
    procs: int | None,
    beta: float | None,
    seed: int,
    policy: str,
    load: float | None,
    run_factor: float | None,
    priority_every: int | None,
    as_pyss: bool,
    csv_path: Path | None,
    swf_out: Path | None,
    config_file: Path | None,
    reservations: tuple[str, ...],
    **given: Any,
) -> None:
    """Simulate one policy and print the metrics of docs/metrics.md."""
    records, size = _workload(trace, model, model_params, count, procs, beta, seed)
    if load is not None:
        records = at_load(records, size, load)
    if run_factor is not None:
        records = scale_run_times(records, run_factor)
    fair_share = fair_share_settings(given)
    choice = _choice(policy, given)
    prepared = prepare_as_pyss(records, size) if as_pyss else prepare(records, size, choice.memory_per_node)
    jobs = prioritize(prepared.jobs, priority_every) if priority_every else prepared.jobs
    # The jobs live as long as the process: the collector need not go through them again at each of
    # the simulation's full collections (a twentieth of a conservative run of the KTH log).
    gc.freeze()
    if config_file is not None or reservations:
        if fair_share is not None:
            raise click.UsageError("priorities are not yet simulated with --config or --reservation")
        from gangsched.cli.sim_partitions import partitioned_run

        outcome, scheduled = partitioned_run(config_file, records, jobs, size, choice, reservations)
    else:
        with _progress(f"{choice.label()} on {size} procs", len(jobs)) as advance:
            outcome, scheduled = run_keeping_jobs(choice, jobs, size, advance, fair_share=fair_share)
    if as_pyss:  # the machine's utilization and loss of capacity stay those of the whole run
        summary = outcome.summary
        outcome = dataclasses.replace(outcome, summary=dataclasses.replace(
            summarize(pyss_selection(scheduled), size), utilization=summary.utilization,
            loss_of_capacity=summary.loss_of_capacity, unfinished=summary.unfinished))
    click.echo(_report(outcome, size, offered_load(records, size)))
    for what, how_many in sorted(prepared.awkward.items()):
        click.echo(f"  {how_many:>6}  {what}")
    if csv_path:
        write_jobs(csv_path, scheduled)
    if swf_out:
        write_schedule(swf_out, scheduled, size, f"scheduled by gangsched {choice.label()}")


@sim.command("sweep")
@workload_options
@click.option("--policy", "policies", default="easy,gs,bgs", show_default=True,
              help="comma-separated policies, each a curve")
@policy_options
@click.option("--loads", default="0.5,0.6,0.7,0.8,0.9", show_default=True,
              help="comma-separated offered loads, or run-time factors with --scale run-times")
@click.option("--scale", "scaling", type=click.Choice(["arrivals", "run-times"]), default="arrivals",
              show_default=True, help="how the load is raised")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="worker processes [the cores]")
@click.option("--out", type=click.Path(path_type=Path), default=Path("results"), show_default=True)
def sweep_command(trace: Path | None, model: str | None, model_params: Path | None, count: int,
                  procs: int | None, beta: float | None, seed: int, policies: str, loads: str, scaling: str,
                  workers: int | None, out: Path, **given: Any) -> None:
    """Run policies over a range of loads in parallel and plot slowdown and wait against utilization."""
    from gangsched.sim.sweep import point_rows, sweep  # worker processes: only a sweep loads multiprocessing

    records, size = _workload(trace, model, model_params, count, procs, beta, seed)
    names = [name.strip() for name in policies.split(",") if name.strip()]
    unknown = [name for name in names if name not in POLICY_NAMES]
    if unknown:
        raise click.UsageError(f"unknown policy {', '.join(unknown)}; choose from {', '.join(POLICY_NAMES)}")
    try:
        levels = [float(level) for level in loads.split(",")]
    except ValueError:
        raise click.UsageError(f"--loads must be numbers separated by commas, not {loads!r}") from None
    choices = [_choice(name, dict(given)) for name in names]
    out.mkdir(parents=True, exist_ok=True)
    from rich.progress import Progress
    from rich.table import Table

    from gangsched.cli.console import command_console

    console = command_console()
    with Progress(console=console, transient=True) as bar:
        task = bar.add_task(f"{len(choices) * len(levels)} runs", total=len(choices) * len(levels))
        points = sweep(records, size, choices, levels, "arrivals" if scaling == "arrivals" else "run-times",
                       workers, done=lambda point: bar.advance(task))
    table = Table(title=f"sweep on {size} procs, load by {scaling}")
    rows = point_rows(points)
    for column in ("policy", "load", "utilization", "wait_s", "bounded_slowdown", "loss_of_capacity"):
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(row[column]) for column in
                        ("policy", "load", "utilization", "wait_s", "bounded_slowdown", "loss_of_capacity")))
    console.print(table)
    from gangsched.sim.plots import write_sweep  # matplotlib only when plotting

    paths = write_sweep(points, out, "sweep")
    console.print("wrote " + ", ".join(str(path) for path in paths))


@contextlib.contextmanager
def _progress(what: str, jobs: int) -> Iterator[Callable[[int], None] | None]:
    """A progress bar of finished jobs on a terminal; elsewhere none, not even loaded (a faster start)."""
    if not sys.stdout.isatty():
        yield None
        return
    from rich.progress import Progress

    with Progress(transient=True, auto_refresh=False) as bar:
        task = bar.add_task(what, total=jobs)
        finished = 0

        def advance(done: int) -> None:
            nonlocal finished
            finished += done
            if finished % 1000 == 0:  # a redraw per job would cost more than the simulation
                bar.update(task, completed=finished, refresh=True)

        yield advance


def read_trace(trace: Path, procs: int | None) -> tuple[list[SwfJob], int]:
    """A trace's records and its machine's size (``procs`` overrides the header); one-line errors."""
    try:
        loaded = read_swf(trace)
    except (SwfError, OSError, UnicodeDecodeError) as error:
        raise click.ClickException(f"cannot read {trace}: {error}") from None
    size = procs or loaded.max_procs()
    if size is None:
        raise click.UsageError(f"{trace} names no MaxProcs/MaxNodes: give --procs")
    return loaded.jobs, size


def _workload(trace: Path | None, model: str | None, model_params: Path | None, count: int, procs: int | None,
              beta: float | None, seed: int) -> tuple[list[SwfJob], int]:
    if (trace is None) == (model is None):
        raise click.UsageError("give a TRACE or --model, not both")
    if (model == "hyper-erlang") != (model_params is not None):
        raise click.UsageError("--model hyper-erlang takes its classes from --model-params FILE, and only it")
    if trace is not None:
        records, size = read_trace(trace, procs)
    else:
        records, size = _model_jobs(model, model_params, count, procs, seed)
    if beta is not None:
        from gangsched.workload.estimates import beta_estimates

        records = beta_estimates(records, beta, seed)
    return records, size


def _model_jobs(model: str | None, model_params: Path | None, count: int, procs: int | None,
                seed: int) -> tuple[list[SwfJob], int]:
    """A workload model's jobs and machine size; each model is loaded only when asked for (start-up)."""
    if model == "zhang2000":
        from gangsched.workload.zhang2000 import MACHINE_NODES, zhang2000_jobs

        return zhang2000_jobs(count, seed), procs or MACHINE_NODES
    size = procs or 128
    if model == "lublin":
        from gangsched.workload.lublin import lublin_jobs

        return lublin_jobs(count, size, seed), size
    if model == "downey":
        from gangsched.workload.downey import DowneyParameters, downey_jobs

        return downey_jobs(count, 0.7, seed, DowneyParameters(procs=size)), size
    from gangsched.workload.hyper_erlang import classes_from_json, hyper_erlang_jobs

    assert model_params is not None
    try:
        classes = classes_from_json(model_params.read_text())
    except ValueError as error:
        raise click.ClickException(f"{model_params}: {error}") from None
    return hyper_erlang_jobs(count, classes, seed), size


Group = tuple[str, int, Stat, Stat]  # jobs, how many, their wait and bounded slowdown
GROUP_COLUMNS: list[Column[Group]] = [
    Column("JOBS", 13, lambda group: group[0]),
    Column("N", 6, lambda group: str(group[1]), right=True),
    Column("WAIT_S", 9, lambda group: f"{group[2].mean:,.1f}", right=True),
    Column("SD", 9, lambda group: f"{group[2].sd:,.1f}", right=True),
    Column("BSLD", 8, lambda group: f"{group[3].mean:,.1f}", right=True),
    Column("SD", 8, lambda group: f"{group[3].sd:,.1f}", right=True),
]


def _report(outcome: Outcome, procs: int, load: float) -> str:
    """The run's metrics as plain text (BSLD: bounded slowdown): rich's tables would be a twentieth of
    the start of a command that is often run in loops and scripts."""
    summary = outcome.summary
    extras = [f"utilization {summary.utilization:.3f}", f"offered load {load:.3f}",
              f"loss of capacity {summary.loss_of_capacity:.3f}",
              f"response {summary.response.mean:,.0f} ± {summary.response.sd:,.0f} s"]
    if outcome.average_slots is not None:
        extras.append(f"average slots {outcome.average_slots:.2f}")
    if outcome.migrations:
        extras.append(f"migrations {outcome.migrations} ({outcome.migrated_tasks} tasks)")
    groups: list[Group] = [("all", summary.jobs, summary.wait, summary.bounded_slowdown),
                           *((name, n, waits, slowdowns) for name, (n, waits, slowdowns) in summary.by_group.items())]
    return "\n".join([f"{outcome.choice.label()}, {procs} procs: {summary.jobs} jobs, {summary.unfinished} unfinished",
                      render(GROUP_COLUMNS, groups), ", ".join(extras)])
