"""Simulation and experiment results as CSV and PNG. matplotlib is imported only here, and only where a figure
is drawn: `gang sim` starts fast, and importing a command (its help) starts no process, where matplotlib's
first import on a host builds its font cache by running fc-list."""

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from matplotlib.figure import Figure

from gangsched.sim.report import write_csv
from gangsched.sim.sweep import Point, point_rows

AXES: dict[str, Callable[[Point], float]] = {
    "load": lambda point: point.load,
    "utilization": lambda point: point.outcome.summary.utilization,
    "bounded_slowdown": lambda point: point.outcome.summary.bounded_slowdown.mean,
    "wait_s": lambda point: point.outcome.summary.wait.mean,
    "loss_of_capacity": lambda point: point.outcome.summary.loss_of_capacity,
    "average_slots": lambda point: point.outcome.average_slots or 0.0,
}


@dataclass
class Panel:
    title: str
    x: str
    y: str
    curves: dict[str, list[tuple[float, float]]] = field(default_factory=dict)
    log_y: bool = False

    def add(self, label: str, x: float, y: float) -> None:
        self.curves.setdefault(label, []).append((x, y))


def new_figure(**options: Any) -> "Figure":
    """A matplotlib figure of ``options`` (figsize, layout, ...)."""
    from matplotlib.figure import Figure

    return Figure(**options)


def save_panels(path: Path, panels: Sequence[Panel], columns: int = 2) -> Path:
    rows = -(-len(panels) // columns)
    figure = new_figure(figsize=(5.2 * min(columns, len(panels)), 4.0 * rows))
    for index, panel in enumerate(panels):
        axes = figure.add_subplot(rows, min(columns, len(panels)), index + 1)
        for label, curve in panel.curves.items():
            curve = sorted(curve)
            axes.plot([x for x, _ in curve], [y for _, y in curve], marker="o", markersize=3, label=label)
        axes.set_title(panel.title, fontsize=10)
        axes.set_xlabel(panel.x)
        axes.set_ylabel(panel.y)
        if panel.log_y:
            axes.set_yscale("log")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=7)
    figure.tight_layout()
    figure.savefig(path, dpi=110)
    return path


def write_sweep(points: Sequence[Point], out: Path, name: str, x: str = "utilization",
                metrics: Sequence[str] = ("bounded_slowdown", "wait_s")) -> list[Path]:
    """The points as CSV and as a PNG with one panel per metric, one curve per policy."""
    csv_path = out / f"{name}.csv"
    write_csv(csv_path, point_rows(points))
    panels = [Panel(metric.replace("_", " "), x.replace("_", " "), metric.replace("_", " "),
                    log_y=metric == "bounded_slowdown") for metric in metrics]
    for point in points:
        for panel, metric in zip(panels, metrics):
            panel.add(point.label, AXES[x](point), AXES[metric](point))
    return [csv_path, save_panels(out / f"{name}.png", panels, columns=len(panels))]
