"""The Standard Workload Format of the Parallel Workloads Archive: read it, write it.

One job per line, 18 whitespace-separated numbers, -1 for unknown; header
lines start with ``;`` and carry ``Key: value`` pairs (MaxNodes, MaxProcs,
...). Files may be gzip-compressed. A line that is not 18 numbers is an
error naming the file and line, never silently skipped.
"""

import gzip
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

FIELDS = 18


class SwfError(Exception):
    pass


class SwfJob(NamedTuple):
    """One record of a Standard Workload Format log, its 18 fields in order.

    A tuple rather than a frozen dataclass, which sets each field through
    object.__setattr__: a log of 28,000 jobs parses in 0.15 s, not 0.21.
    """

    job_id: int
    submit: float  # seconds from the start of the log
    wait: float
    run_time: float
    procs: int  # allocated processors
    avg_cpu: float
    memory: float
    req_procs: int
    req_time: float  # the user's estimate
    req_memory: float
    status: int  # 1 completed, 0 failed, 5 cancelled; -1 unknown
    user: int
    group: int
    executable: int
    queue: int
    partition: int
    preceding_job: int
    think_time: float


def modelled_job(job_id: int, submit: float, run_time: float, procs: int) -> SwfJob:
    """A job as a workload model makes it: arrival, size and run time; the rest unknown."""
    return SwfJob(job_id, submit, -1, run_time, procs, -1, -1, procs, -1, -1,
                  1, -1, -1, -1, -1, -1, -1, -1)


@dataclass
class SwfTrace:
    jobs: list[SwfJob]
    header: dict[str, str] = field(default_factory=dict)
    comments: list[str] = field(default_factory=list)  # header lines as they were

    def max_procs(self) -> int | None:
        for key in ("MaxProcs", "MaxNodes"):
            value = self.header.get(key, "").split()
            if value and value[0].lstrip("-").isdigit() and int(value[0]) > 0:
                return int(value[0])
        return None


def read_swf(path: Path) -> SwfTrace:
    with gzip.open(path, "rt") if path.suffix == ".gz" else open(path) as text:
        return parse_swf(text, str(path))


def parse_swf(lines: Iterable[str], name: str = "<swf>") -> SwfTrace:
    jobs: list[SwfJob] = []
    header: dict[str, str] = {}
    comments: list[str] = []
    for number, line in enumerate(lines, start=1):
        stripped = line.strip()
        if not stripped:
            continue
        if stripped.startswith(";"):
            comments.append(stripped)
            key, colon, value = stripped[1:].partition(":")
            if colon and key.strip() and " " not in key.strip():
                header[key.strip()] = value.strip()
            continue
        jobs.append(_job(stripped.split(), name, number))
    return SwfTrace(jobs, header, comments)


# the fields SWF gives as whole numbers (the others are seconds, averages or amounts that may have decimals)
_WHOLE = frozenset((0, 4, 7, 10, 11, 12, 13, 14, 15, 16))


def _job(v: list[str], name: str, number: int) -> SwfJob:
    if len(v) != FIELDS:
        raise SwfError(f"{name}:{number}: {len(v)} fields, SWF has {FIELDS}")
    try:
        # most logs hold whole numbers only, and int() reads one in half float()'s time: a tenth
        # of `gang sim`'s start on a log of 28,000 jobs
        n: list[Any] = list(map(int, v))
    except ValueError:
        try:
            n = [int(text) if index in _WHOLE else float(text) for index, text in enumerate(v)]
        except ValueError:
            raise SwfError(f"{name}:{number}: a field is not a whole number where SWF wants one: "
                           f"{' '.join(v)}") from None
    return SwfJob(  # the whole ones are int either way
        n[0], float(n[1]), float(n[2]), float(n[3]), n[4], float(n[5]),
        float(n[6]), n[7], float(n[8]), float(n[9]), n[10], n[11],
        n[12], n[13], n[14], n[15], n[16], float(n[17]),
    )


def write_swf(path: Path, jobs: Iterable[SwfJob], comments: Iterable[str] = ()) -> None:
    with gzip.open(path, "wt") if path.suffix == ".gz" else open(path, "w") as out:
        for comment in comments:
            out.write(comment if comment.startswith(";") else f"; {comment}")
            out.write("\n")
        for job in jobs:
            out.write(" ".join(_format(value) for value in job) + "\n")


def _format(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else f"{value:.2f}"

