"""Fixed-width text tables, as squeue and sinfo print them: each column has its width, a value
is cut to it (but for an id, which a column widens to fit), a header never is, and the last
column takes what is left. Legible at 80
columns and parseable in a pipe; the fields are chosen with ``--format`` by name.

A row is a map of the protocol's fields (JobInfo's, NodeInfo's): the list commands read
the master's replies without pydantic."""

import time
from collections.abc import Callable, Sequence
from typing import Any, Generic, NamedTuple, TypeVar

from gangsched.protocol.array_ranges import shown_job_id
from gangsched.protocol.durations import format_duration
from gangsched.protocol.step_names import first_step_name, step_name
from gangsched.protocol.times import format_time

Row = TypeVar("Row")
Fields = dict[str, Any]


class Column(NamedTuple, Generic[Row]):  # not a dataclass: its import alone is a tenth of `gang queue`'s start
    header: str
    width: int
    value: Callable[[Row], str]
    right: bool = False  # numbers
    widens: bool = False  # never cut: the column is as wide as its widest value (ids)


def render(columns: Sequence[Column[Row]], rows: Sequence[Row]) -> str:
    cells = [[column.value(row) for column in columns] for row in rows]
    widths = [max([column.width, *(len(line[index]) for line in cells)]) if column.widens else column.width
              for index, column in enumerate(columns)]

    def line(values: list[str]) -> str:
        fitted = [value[:max(width, len(column.header))] for column, width, value in zip(columns, widths, values)]
        parts = [value.rjust(width) if column.right else value.ljust(width)
                 for column, width, value in zip(columns[:-1], widths, fitted)]
        last = values[-1].rjust(widths[-1]) if columns[-1].right else values[-1]
        return " ".join([*parts, last]).rstrip()

    return "\n".join([line([column.header for column in columns]), *(line(values) for values in cells)])


def chosen(fields: dict[str, Column[Row]], spec: str) -> list[Column[Row]]:
    """The columns ``spec`` names, comma-separated; ValueError naming the unknown ones."""
    names = [name.strip().lower() for name in spec.split(",") if name.strip()]
    unknown = [name for name in names if name not in fields]
    if unknown or not names:
        raise ValueError(f"no field {', '.join(unknown) or '(none given)'}: the fields are {', '.join(fields)}")
    return [fields[name] for name in names]


# Slurm's compact state codes
STATE_CODES = {"pending": "PD", "running": "R", "completed": "CD", "failed": "F", "cancelled": "CA",
               "node_fail": "NF", "timeout": "TO", "out_of_memory": "OOM", "suspended": "S"}


def _elapsed(job: Fields) -> str:
    if job["start_time"] is None:
        return "0:00"
    seconds = int((job["end_time"] or time.time()) - job["start_time"])
    days, seconds = divmod(seconds, 86400)
    hours, rest = divmod(seconds, 3600)
    clock = f"{hours}:{rest // 60:02d}:{rest % 60:02d}" if hours or days else f"{rest // 60}:{rest % 60:02d}"
    return f"{days}-{clock}" if days else clock


def _clock(unix_time: float | None) -> str:
    return "-" if unix_time is None else format_time(unix_time)


def number(value: float | None, digits: int = 0) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def megabytes(size: int | None) -> str:
    """Whole MiB with Slurm's M, as squeue and sacct print memory."""
    return "-" if size is None else f"{size >> 20}M"


def _requested(job: Fields) -> str:
    """squeue's MIN_MEMORY: per node, or per task with a c (Slurm's --mem-per-cpu)."""
    spec = job["spec"]
    if spec.get("mem_per_node") is not None:
        return megabytes(spec["mem_per_node"])
    return "-" if spec.get("mem_per_cpu") is None else megabytes(spec["mem_per_cpu"]) + "c"


def _job_id(job: Fields) -> str:
    return shown_job_id(job["job_id"], job["spec"].get("array_job_id"), job.get("array_pending"))


def _preempted(job: Fields) -> str:
    """How often and how long a job was suspended by higher-tier jobs, and by which: ``2x 41s by 7,9``."""
    preemptions = job.get("preemptions") or []
    if not preemptions:
        return "-"
    total = sum((each["end"] or time.time()) - each["start"] for each in preemptions)
    by = ",".join(dict.fromkeys(str(each["by_job"]) for each in preemptions))
    return f"{len(preemptions)}x {total:.0f}s by {by}"


def _where(job: Fields) -> str:
    if job["state"] == "running":
        return ",".join(dict.fromkeys(job["node_names"]))
    if job["state"] == "suspended":  # where it holds its memory, and why
        return ",".join(dict.fromkeys(job["node_names"])) + f" ({job['reason']})"
    return f"({job['reason']})" if job["reason"] else ""


JOB_FIELDS: dict[str, Column[Fields]] = {
    "jobid": Column("JOBID", 7, lambda job: _job_id(job), right=True, widens=True),
    "partition": Column("PARTITION", 9, lambda job: job["spec"].get("partition") or "-"),
    "name": Column("NAME", 8, lambda job: job["spec"]["name"]),
    "user": Column("USER", 8, lambda job: job["spec"]["user"]),
    "st": Column("ST", 2, lambda job: STATE_CODES.get(job["state"], job["state"].upper())),
    "state": Column("STATE", 9, lambda job: job["state"].upper()),
    "time": Column("TIME", 8, _elapsed, right=True),
    "tasks": Column("TASKS", 5, lambda job: str(job["spec"]["tasks"]), right=True),
    "ran": Column("RAN_S", 7, lambda job: f"{job['ran_s']:.0f}", right=True),
    "limit": Column("LIMIT_S", 8, lambda job: number(job["spec"]["estimate_s"]), right=True),
    "util": Column("UTIL%", 5, lambda job: number(job["util_pct"]), right=True),
    "pred": Column("PRED%", 5, lambda job: number(job["predicted_pct"]), right=True),
    "barriers": Column("BARRIERS", 8, lambda job: str(job["barriers"]), right=True),
    "rate": Column("BAR/S", 7, lambda job: number(job["barriers_per_s"], 2), right=True),
    "migrations": Column("MIGR", 4, lambda job: str(len(job["migration_s"])), right=True),
    "mem": Column("MIN_MEMORY", 10, _requested, right=True),
    "maxrss": Column("MAXRSS", 7, lambda job: megabytes(job.get("max_rss")), right=True),
    "exit": Column("EXIT", 4, lambda job: "-" if job["exit_code"] is None else str(job["exit_code"]), right=True),
    "preempted": Column("PREEMPTED", 16, _preempted),
    "array": Column("ARRAY", 9, lambda job: "-" if job["spec"]["array_index"] is None
                    else f"{job['spec']['array_job_id']}_{job['spec']['array_index']}"),
    "submit": Column("SUBMIT", 19, lambda job: _clock(job["submit_time"])),
    "start": Column("START", 19, lambda job: _clock(job["start_time"])),
    "end": Column("END", 19, lambda job: _clock(job["end_time"])),
    "nodelist": Column("NODELIST(REASON)", 16, _where),
    "reservation": Column("RESERVATION", 11, lambda job: job["spec"].get("reservation") or "-"),
}
QUEUE_FORMAT = "jobid,partition,name,user,st,time,tasks,util,nodelist"  # 80 columns with a short node list
HISTORY_FORMAT = "jobid,name,user,state,exit,start,time,nodelist"  # sacct's, and the reason

# a step as `gang queue -s` shows it, as squeue -s does: (its job, the step), with Slurm's step names
Step = tuple[Fields, Fields]
STEP_COLUMNS: list[Column[Step]] = [
    Column("STEPID", 12, lambda pair: f"{pair[0]['job_id']}.{_step_name(pair)}", widens=True),
    Column("NAME", 10, lambda pair: str(pair[1]["name"])),
    Column("USER", 8, lambda pair: pair[0]["spec"]["user"]),
    Column("ST", 2, lambda pair: STATE_CODES.get(pair[1]["state"], pair[1]["state"].upper())),
    Column("TIME", 8, lambda pair: format_duration(time.time() - (pair[1]["start_time"] or time.time())), right=True),
    Column("TASKS", 5, lambda pair: str(pair[1]["tasks"]), right=True),
    Column("NODELIST", 16, lambda pair: ",".join(pair[1]["nodes"])),
]


def _step_name(pair: Step) -> str:
    job, step = pair
    return step_name(first_step_name(bool(job.get("batch")), bool(job["spec"].get("allocation"))), step["step_id"])


def live_steps(jobs: list[Fields]) -> list[Step]:
    """The steps of ``jobs`` that run (or are suspended with their job), in job and step order."""
    return [(job, step) for job in jobs for step in job.get("steps") or () if step["end_time"] is None]


NODE_FIELDS: dict[str, Column[Fields]] = {
    "node": Column("NODELIST", 12, lambda node: node["name"]),
    "state": Column("STATE", 8, lambda node: node["state"]),
    "partition": Column("PARTITION", 9, lambda node: ",".join(node.get("partitions") or []) or "-"),
    "share": Column("SHARE", 5, lambda node: f"{node['cpu_share']:g}", right=True),
    "procs": Column("PROCS(U/T)", 10, lambda node: f"{node['processors_used']}/{node['processors']}", right=True),
    "memory": Column("MEMORY", 7, lambda node: str(node["memory"] >> 20), right=True),  # MiB, as sinfo's %m
    "allocmem": Column("ALLOC_MEM", 9, lambda node: str(node["memory_committed"] >> 20), right=True),
    "seen": Column("SEEN_S", 6, lambda node: f"{node['seen_ago_s']:.1f}", right=True),
    "jobs": Column("JOBS", 10, lambda node: ",".join(map(str, node["jobs"])) or "-"),
    "via": Column("VIA", 12, lambda node: node["via"] or "-"),  # its relay (docs/architecture.md, 'Relays')
    "reservation": Column("RESERVATION", 11, lambda node: ",".join(node.get("reservations") or []) or "-"),
}
NODES_FORMAT = "node,state,share,procs,memory,allocmem,seen,jobs"


def reason_rows(nodes: list[Fields], hostlist: Callable[[list[str]], str]) -> str:
    """sinfo -R: a line for each reason an administrator gave (with who and since when), and its nodes."""
    by_reason: dict[tuple[str, str, float], list[str]] = {}
    for node in nodes:
        reason = node.get("reason")
        if reason is not None:
            by_reason.setdefault((reason["text"], reason["user"], reason["time"]), []).append(node["name"])
    rows = [{"reason": text, "user": user, "time": _clock(when), "nodelist": hostlist(names)}
            for (text, user, when), names in sorted(by_reason.items(), key=lambda item: item[0][2])]
    columns: list[Column[dict[str, str]]] = [
        Column("REASON", 20, lambda row: row["reason"]), Column("USER", 9, lambda row: row["user"]),
        Column("TIMESTAMP", 19, lambda row: row["time"]), Column("NODELIST", 8, lambda row: row["nodelist"])]
    return render(columns, rows)


def partition_rows(partitions: list[Fields], nodes: list[Fields], hostlist: Callable[[list[str]], str]) -> str:
    """sinfo's partition view: a line for each partition and state of its nodes, the default marked *."""
    state_of = {node["name"]: node["state"] for node in nodes}
    rows = []
    for partition in partitions:
        by_state: dict[str, list[str]] = {}
        for name in partition["nodes"]:
            by_state.setdefault(state_of.get(name, "unknown"), []).append(name)
        limit = "infinite" if partition["max_time_s"] is None else format_duration(partition["max_time_s"])
        for state, names in sorted(by_state.items()) or [("-", [])]:
            rows.append({"partition": partition["name"] + ("*" if partition["default"] else ""),
                         "avail": partition["state"], "timelimit": limit,
                         "nodes": str(len(names)), "state": state, "nodelist": hostlist(names) if names else "-"})
    columns: list[Column[dict[str, str]]] = [
        Column("PARTITION", 9, lambda row: row["partition"]), Column("AVAIL", 5, lambda row: row["avail"]),
        Column("TIMELIMIT", 10, lambda row: row["timelimit"], right=True),
        Column("NODES", 5, lambda row: row["nodes"], right=True), Column("STATE", 5, lambda row: row["state"]),
        Column("NODELIST", 8, lambda row: row["nodelist"])]
    return render(columns, rows)

