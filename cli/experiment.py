"""`gang experiment ID --out DIR`: rerun one of the papers' experiments."""

from pathlib import Path

import click
from rich.console import Console
from rich.markdown import Markdown
from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

from gangsched.bench.experiments import EXPERIMENTS

console = Console()


@click.command()
@click.argument("name", type=click.Choice(sorted(EXPERIMENTS), case_sensitive=False))
@click.option("--out", type=click.Path(path_type=Path), default=Path("results"), show_default=True,
              help="folder for the CSV, PNG and markdown files")
@click.option("--seconds", type=float, default=30.0, show_default=True,
              help="measurement window of each run")
def experiment(name: str, out: Path, seconds: float) -> None:
    """Rerun an experiment of the papers on fresh local clusters (see SPEC §10)."""
    chosen = EXPERIMENTS[name.upper()]
    out.mkdir(parents=True, exist_ok=True)
    with Progress(TextColumn("{task.description}"), BarColumn(), TextColumn("{task.completed}/{task.total}"),
                  TimeElapsedColumn(), console=console) as progress:
        task = progress.add_task(f"{chosen.name}: {chosen.title}", total=chosen.runs)

        def advance(what: str) -> None:
            progress.update(task, advance=1, description=f"{chosen.name}: {what} done")

        table = chosen.run(out, seconds, advance)
    report = f"# {chosen.name}: {chosen.title}\n\n{table}\n"
    path = out / f"{chosen.name.lower()}.md"
    path.write_text(report)
    console.print(Markdown(report))
    console.print(f"wrote {path} and the CSV and PNG beside it")
