"""Rich tables for jobs, nodes, the matrix and the local cluster's daemons."""

from typing import TYPE_CHECKING

from rich.table import Table
from rich.text import Text

from gangsched.protocol.messages import JobInfo, MatrixView, NodeInfo

if TYPE_CHECKING:  # the job commands print with this module and start no cluster
    from gangsched.deploy.local import ClusterState

_STATE_STYLE = {
    "pending": "yellow", "running": "green", "completed": "dim", "failed": "red",
    "cancelled": "magenta", "node_fail": "red", "timeout": "red", "up": "green", "down": "red",
}


def _state(value: str) -> Text:
    return Text(value.upper(), style=_STATE_STYLE.get(value, ""))


def _elapsed(job: JobInfo, now: float) -> str:
    if job.start_time is None:
        return "-"
    seconds = int((job.end_time or now) - job.start_time)
    hours, rest = divmod(seconds, 3600)
    return f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours else f"{rest // 60}:{rest % 60:02d}"


def _number(value: float | None, digits: int = 1) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def jobs(jobs: list[JobInfo], now: float) -> Table:
    table = Table(box=None, header_style="bold")
    numeric = ("JOBID", "TASKS", "RAN", "LIMIT", "UTIL%", "PRED%", "BARRIERS", "BAR/S", "MIGR")
    for column in ("JOBID", "NAME", "USER", "STATE", "TASKS", "ELAPSED", "RAN", "LIMIT", "UTIL%", "PRED%",
                   "BARRIERS", "BAR/S", "MIGR", "NODELIST(REASON)"):
        table.add_column(column, justify="right" if column in numeric else "left")
    for job in jobs:
        where = ",".join(dict.fromkeys(job.node_names)) if job.state == "running" \
            else f"({job.reason})" if job.reason else ""
        table.add_row(
            str(job.job_id), job.spec.name, job.spec.user, _state(job.state), str(job.spec.tasks),
            _elapsed(job, now), f"{job.ran_s:.0f}", _number(job.spec.estimate_s, 0), _number(job.util_pct),
            _number(job.predicted_pct), str(job.barriers), _number(job.barriers_per_s, 2),
            str(len(job.migration_s)), where,
        )
    return table


def nodes(nodes: list[NodeInfo]) -> Table:
    table = Table(box=None, header_style="bold")
    for column in ("NODE", "STATE", "CPUS", "PROCS(U/T)", "JOBS", "SEEN"):
        table.add_column(column)
    for node in nodes:
        table.add_row(node.name, _state(node.state), f"{node.cpus:g}", f"{node.processors_used}/{node.processors}",
                      ",".join(map(str, node.jobs)) or "-", f"{node.seen_ago_s:.1f}s ago")
    return table


def matrix(view: MatrixView, jobs: list[JobInfo]) -> Table:
    """The turn's row marked '>', its partner '+'; a job running as an alternate is starred."""
    predicted = {job.job_id: job.predicted_pct for job in jobs}
    title = f"{view.policy} gang scheduling, quantum {view.quantum} ({view.quantum_ms} ms)"
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
        jobs_text = " ".join(f"{job}({_number(predicted.get(job), 0)})" for job in members)
        table.add_row(Text(f"{mark} {index}", style=style or ""), *cells, jobs_text, style=style)
    return table


def daemons(state: "ClusterState", alive: dict[str, bool]) -> Table:
    table = Table(title=f"local cluster, master at {state.master}", box=None, header_style="bold")
    for column in ("DAEMON", "PID", "STATE"):
        table.add_column(column)
    for name, pid in state.pids.items():
        table.add_row(name, str(pid), _state("up" if alive.get(name) else "down"))
    return table
