"""Rich tables for the matrix and the local cluster's daemons (jobs and nodes: ``table``)."""

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from gangsched.cli.table import number
from gangsched.protocol.messages import MatrixView
from gangsched.protocol.records import JobInfo

if TYPE_CHECKING:  # the job commands print with this module and start no cluster
    from gangsched.deploy.local import ClusterState

_STATE_STYLE = {
    "pending": "yellow", "running": "green", "completed": "dim", "failed": "red",
    "cancelled": "magenta", "node_fail": "red", "timeout": "red", "up": "green", "down": "red",
}


def _state(value: str) -> Text:
    return Text(value.upper(), style=_STATE_STYLE.get(value, ""))


def matrix(view: MatrixView, jobs: list[JobInfo]) -> Table:
    """The turn's row marked '>', its partner '+'; a job running as an alternate is starred."""
    predicted = {job.job_id: job.predicted_pct for job in jobs}
    title = f"partition {view.partition}: {view.policy} gang scheduling, quantum {view.quantum} ({view.quantum_ms} ms)"
    table = Table(title=title, header_style="bold")
    table.add_column("SLOT")
    processors = view.processors or [0] * len(view.nodes)
    several = {node for node, index in zip(view.nodes, processors, strict=True) if index > 0}
    for node, index in zip(view.nodes, processors, strict=True):
        table.add_column(f"{node}:{index}" if node in several else node, justify="center")
    table.add_column("JOBS (PRED%)")
    marks = dict(zip(view.running, (">", "+")))
    for index, row in enumerate(view.rows):
        mark = marks.get(index, " ")
        style = {">": "bold green", "+": "green"}.get(mark)
        members = sorted({job for job in row if job is not None})
        cells = [("." if job is None else f"{job}*" if job in view.alternates else str(job)) for job in row]
        jobs_text = " ".join(f"{job}({number(predicted.get(job))})" for job in members)
        table.add_row(Text(f"{mark} {index}", style=style or ""), *cells, jobs_text, style=style)
    return table


def daemons(state: "ClusterState", alive: dict[str, bool]) -> Table:
    table = Table(title=f"local cluster, master at {state.master}", box=None, header_style="bold")
    for column in ("DAEMON", "PID", "STATE"):
        table.add_column(column)
    for name, pid in state.pids.items():
        table.add_row(name, str(pid), _state("up" if alive.get(name) else "down"))
    return table
