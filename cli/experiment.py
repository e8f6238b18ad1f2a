"""`gang experiment ID --out DIR`: rerun one of the papers' experiments (docs/experiments.md).

L1-L6 run on fresh local clusters; S1-S8 in the simulator, in worker processes.
"""

from pathlib import Path

import click
from rich.markdown import Markdown
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from gangsched import traces
from gangsched.bench.experiments import LIVE
from gangsched.cli.console import command_console
from gangsched.cli.sim import TRACE
from gangsched.jobs.mpi_environments import LIBRARIES
from gangsched.sim.baseline import MODELS
from gangsched.sim.experiments import SIMULATED
from gangsched.sim.report import ExperimentOptions

console = command_console()
EXPERIMENTS = {**LIVE, **SIMULATED}


@click.command()
@click.argument("name", type=click.Choice(sorted(EXPERIMENTS), case_sensitive=False))
@click.option("--out", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="folder for the CSV, PNG and markdown files")
@click.option("--seconds", type=float, default=30.0, show_default=True,
              help="L1-L5: measurement window of each run")
@click.option("--jobs", type=click.IntRange(min=10), default=10_000, show_default=True,
              help="S1-S5, S7: jobs in the model workload; S8: the first jobs of the log")
@click.option("--workers", type=click.IntRange(min=1), default=None, help="S1-S8: worker processes [the cores]")
@click.option("--seeds", type=click.IntRange(min=1), default=None,
              help="S3: model workloads to average each cell over [3]")
@click.option("--workload", type=click.Choice(sorted(MODELS)), default="zhang2000", show_default=True,
              help="S1-S4, S7: the baseline's model: calibrated to Zhang et al. 2000, or Lublin-Feitelson")
@click.option("--trace", type=TRACE, default=str(traces.KTH_SP2), show_default="the KTH SP2 log shipped with gangsched",
              help="S6: the KTH SP2 log")
@click.option("--mpi-library", type=click.Choice(LIBRARIES), default="mpich",
              show_default=True, help="L6: the MPI library its jobs are built with, each in an environment of "
              "its own (docs/mpi.md)")
def experiment(name: str, out: Path, seconds: float, jobs: int, workers: int | None, seeds: int | None,
               workload: str, trace: Path, mpi_library: str) -> None:
    """Rerun an experiment: L1-L6 live (L6: MPI jobs, gang vs local), S1-S8 simulated."""
    chosen = EXPERIMENTS[name.upper()]
    options = ExperimentOptions(seconds=seconds, jobs=jobs, workers=workers, trace=trace,
                                seeds=seeds or chosen.seeds, workload=workload, mpi_library=mpi_library)
    out.mkdir(parents=True, exist_ok=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"{chosen.name}: {chosen.title}", total=chosen.runs * (options.seeds or 1))

        def advance(what: str) -> None:
            progress.update(task, advance=1, description=f"{chosen.name}: {what} done")

        table = chosen.run(out, options, advance)
    report = f"# {chosen.name}: {chosen.title}\n\n{table}\n"
    path = out / f"{chosen.name.lower()}.md"
    path.write_text(report)
    console.print(Markdown(report))
    console.print(f"wrote {path} and the CSV and PNG beside it")
