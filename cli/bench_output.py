"""How the `gang bench` commands print their figures: a table on the terminal, and CSV if asked."""

from pathlib import Path
from typing import Any

from rich.table import Table

from gangsched.cli.console import command_console
from gangsched.sim.report import write_csv

console = command_console()


def print_rows(title: str, rows: list[dict[str, Any]], csv_path: Path | None) -> None:
    """The rows as a table, a column per key of the first; and as CSV if asked."""
    table = Table(title=title)
    for column in rows[0]:
        table.add_column(column, justify="right")
    for row in rows:
        table.add_row(*(str(value) for value in row.values()))
    console.print(table)
    if csv_path:
        write_rows_csv(csv_path, rows)


def print_figures(title: str, row: dict[str, Any], csv_path: Path | None) -> None:
    """One run's figures as a table of two columns, a line per figure (too many for a column each on a
    terminal); as one CSV row if asked."""
    table = Table(title=title)
    table.add_column("figure")
    table.add_column("value", justify="right")
    for name, value in row.items():
        table.add_row(name, str(value))
    console.print(table)
    if csv_path:
        write_rows_csv(csv_path, [row])


def write_rows_csv(path: Path, rows: list[dict[str, Any]]) -> None:
    write_csv(path, rows)
    console.print(f"wrote {path}")
