"""Sweep results as CSV and PNG (matplotlib is imported only here, so `gang sim` starts fast)."""

from collections.abc import Callable, Sequence
from pathlib import Path

from matplotlib.figure import Figure

from gangsched.bench.report import write_csv
from gangsched.sim.sweep import Point, point_rows

AXES: dict[str, Callable[[Point], float]] = {
    "load": lambda point: point.load,
    "utilization": lambda point: point.outcome.summary.utilization,
    "bounded_slowdown": lambda point: point.outcome.summary.bounded_slowdown.mean,
    "wait_s": lambda point: point.outcome.summary.wait.mean,
    "loss_of_capacity": lambda point: point.outcome.summary.loss_of_capacity,
    "average_slots": lambda point: point.outcome.average_slots or 0.0,
}


def write_sweep(points: Sequence[Point], out: Path, name: str, x: str = "utilization",
                metrics: Sequence[str] = ("bounded_slowdown", "wait_s")) -> list[Path]:
    """The points as CSV and as a PNG with one panel per metric, one curve per policy."""
    csv_path = out / f"{name}.csv"
    write_csv(csv_path, point_rows(points))
    figure = Figure(figsize=(5.5 * len(metrics), 4.2))
    for index, metric in enumerate(metrics):
        axes = figure.add_subplot(1, len(metrics), index + 1)
        for label in dict.fromkeys(point.label for point in points):
            curve = sorted((AXES[x](point), AXES[metric](point)) for point in points if point.label == label)
            axes.plot([along for along, _ in curve], [value for _, value in curve], marker="o", label=label)
        axes.set_xlabel(x.replace("_", " "))
        axes.set_ylabel(metric.replace("_", " "))
        if metric == "bounded_slowdown":
            axes.set_yscale("log")
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    figure.tight_layout()
    png_path = out / f"{name}.png"
    figure.savefig(png_path, dpi=110)
    return [csv_path, png_path]
