"""``sacct``, as sacct(1) shows what jobs did, from the master's store: a row for each job's allocation and for
each of its steps (``JOBID.batch``, ``JOBID.0``, ...; ``-X`` the allocations alone), ``-o`` fields with widths
(``Field%N`` right-justified, ``%-N`` left), ``-P``/``-p`` parsable, ``-n``, ``-b``, ``-l``, and Slurm's default
time window (``-S`` midnight, ``-E`` now; ``-j`` from the epoch; ``-s`` the jobs in those states in the
window). Another user's jobs only for root, or asked with ``-a``/``-u``, as Slurm without PrivateData."""

from __future__ import annotations

import os
import time

from gangsched.slurm import words
from gangsched.slurm.command import SlurmError, master, nodes_named, options, run, users_named
from gangsched.slurm.getopt import table
from gangsched.slurm.sacct_fields import FIELDS
from gangsched.slurm.words import step_name

DEFAULT = "JobID,JobName,Partition,Account,AllocCPUS,State,ExitCode"
BRIEF = "JobID,State,ExitCode"
LONG = ("JobID,JobIDRaw,JobName,Partition,MaxVMSize,MaxVMSizeNode,MaxVMSizeTask,AveVMSize,MaxRSS,MaxRSSNode,"
        "MaxRSSTask,AveRSS,MaxPages,MaxPagesNode,MaxPagesTask,AvePages,MinCPU,MinCPUNode,MinCPUTask,AveCPU,NTasks,"
        "AllocCPUS,Elapsed,State,ExitCode,AveCPUFreq,ReqCPUFreqMin,ReqCPUFreqMax,ReqCPUFreqGov,ReqMem,"
        "ConsumedEnergy,MaxDiskRead,MaxDiskReadNode,MaxDiskReadTask,AveDiskRead,MaxDiskWrite,MaxDiskWriteNode,"
        "MaxDiskWriteTask,AveDiskWrite,ReqTRES,AllocTRES,TRESUsageInAve,TRESUsageInMax,TRESUsageInMaxNode,"
        "TRESUsageInMaxTask,TRESUsageInMin,TRESUsageInMinNode,TRESUsageInMinTask,TRESUsageInTot,TRESUsageOutMax,"
        "TRESUsageOutMaxNode,TRESUsageOutMaxTask,TRESUsageOutAve,TRESUsageOutTot")
USAGE = ("[-A account_list] [-E end_time] [-j job(.step)_list] [-N node_list] [--name=job_names] "
         "[-o format] [-r partition_list] [-S start_time] [-s state_list] [-u user_list] [-abDlnPpXv]")
FLAGS = table((
    (("-X", "--allocations"), False, "allocations"), (("-P", "--parsable2"), False, "parsable2"),
    (("-p", "--parsable"), False, "parsable"), (("--delimiter",), True, "delimiter"),
    (("-n", "--noheader"), False, "noheader"), (("-b", "--brief"), False, "brief"), (("-l", "--long"), False, "long"),
    (("-o", "--format"), True, "format"), (("-j", "--jobs"), True, "jobs"), (("-S", "--starttime"), True, "start"),
    (("-E", "--endtime"), True, "end"), (("--name",), True, "name"), (("-u", "--uid", "--user"), True, "user"),
    (("-a", "--allusers"), False, "all"), (("-s", "--state"), True, "states"),
    (("-r", "--partition"), True, "partition"), (("-N", "--nodelist"), True, "nodes"),
    (("-A", "--accounts"), True, "accounts"), (("-q", "--qos"), True, "qos"),
    (("-e", "--helpformat"), False, "helpformat"),
    (("-D", "--duplicates"), False, "ignored"), (("-L", "--allclusters"), False, "ignored"),
    (("-M", "--clusters"), True, "ignored"), (("--local",), False, "ignored"), (("--noconvert",), False, "ignored"),
    (("-v", "--verbose"), False, "ignored"), (("-h", "--help"), False, "help"), (("--usage",), False, "help"),
    (("-V", "--version"), False, "version"),
))
TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

    from gangsched.slurm.sacct_fields import Step, Value

    # a field to print: its name, its width (negative: left-justified), how it reads a row
    Column = tuple[str, int, Value | None]
    Row = tuple[dict[str, Any], Step]


def columns_of(text: str) -> list[Column]:
    """``-o``'s fields by commas, each named by any prefix of its name (the first in Slurm's order), with an
    optional ``%WIDTH``; ``ALL``: every one."""
    if text.lower() == "all":
        return [(name, width, value) for name, (width, value) in FIELDS.items()]
    found: list[Column] = []
    for item in filter(None, text.split(",")):
        name, _, width = item.partition("%")
        match = next((field for field in FIELDS if field.lower().startswith(name.lower())), None) if name else None
        if match is None:
            raise SlurmError(f'Invalid field requested: "{name}"')
        size, value = FIELDS[match]
        if width:
            try:
                size = int(width)
            except ValueError:
                raise SlurmError(f'Invalid field requested: "{item}"') from None
        found.append((match, size, value))
    return found


def _ids(text: str) -> list[tuple[int, int | None, str | None]]:
    """``-j``'s items: a job (an array's job: all of it), an array's job with an index (``12_3``), each with a
    step (``12.batch``, ``12.0``) or None."""
    found = []
    for item in text.split(","):
        job, _, step = item.partition(".")
        first, _, index = job.partition("_")
        if not first.isdigit() or (index and not index.isdigit()) or (step and step != "batch" and not step.isdigit()):
            raise SlurmError(f"Bad job/step specified: {item}")
        found.append((int(first), int(index) if index else None, step or None))
    return found


def _window(given: dict[str, Any], now: float) -> tuple[float, float]:
    """The time window of Slurm's sacct (its manual page, DEFAULT TIME WINDOW)."""
    from gangsched.protocol.times import TimeError, parse_time

    try:
        start = parse_time(given["start"], now) if "start" in given else None
        end = parse_time(given["end"], now) if "end" in given else None
    except TimeError as error:
        raise SlurmError(f"Invalid time specification: {error}") from None
    if start is None:
        start = 0.0 if "jobs" in given else now if "states" in given else parse_time("midnight", now)
    if end is None:
        end = start if "states" in given and "start" in given else now
    return start, end


def _in_window(item: dict[str, Any], states: set[str] | None, start: float, end: float, eligible: float | None) -> bool:
    """Whether a job (or a step) is one the window shows: eligible in it, or without ``-s``; with ``-s``, in one
    of those states in it."""
    began, ended = item.get("start_time"), item.get("end_time")
    if states is None:
        return eligible is not None and eligible <= end and (ended is None or ended >= start)
    state = item["state"]
    if state not in states:
        return False
    if state == "pending":
        return eligible is not None and eligible <= end and (began is None or began >= start)
    if state in words.ACTIVE:
        return began is not None and began <= end and (ended is None or ended >= start)
    return ended is not None and start <= ended <= end


def _eligible(job: dict[str, Any]) -> float | None:
    return None if job.get("hold") and job["state"] == "pending" else float(job["submit_time"])


def _jobs(given: dict[str, Any], ids: list[tuple[int, int | None, str | None]] | None,
          start: float) -> list[dict[str, Any]]:
    """The jobs the ids name, or every job active or ended since ``start``, of one user where that is all."""
    from gangsched.client.connection import login_name

    me = login_name()
    users = users_named(given["user"]) if "user" in given else None if given.get("all") or me == "root" else {me}
    with master() as connection:
        if ids is not None:
            jobs = connection.job_maps(sorted({job_id for job_id, _, _ in ids}), brief=True)
            if any(job["spec"].get("array_job_id") == job["job_id"] for job in jobs):  # an array: all of its jobs
                jobs = connection.job_maps(include_finished=True, ended_after=start, arrays=True, brief=True)
        else:
            jobs = connection.job_maps(include_finished=True, ended_after=start, arrays=True, brief=True,
                                       user=next(iter(users)) if users is not None and len(users) == 1 else None)
    return [job for job in jobs if users is None or job["spec"]["user"] in users]


def rows(given: dict[str, Any], now: float) -> list[Row]:
    """The rows asked for: each job's allocation, then its steps (but with ``-X``), jobs by id."""
    ids = _ids(given["jobs"]) if "jobs" in given else None
    try:
        states = words.states_asked(given["states"]) if "states" in given else None
    except words.StateError as error:
        raise SlurmError(f"Invalid state specified: {error}") from None
    start, end = _window(given, now)
    names = set(given["name"].split(",")) if "name" in given else None
    partitions = set(given["partition"].split(",")) if "partition" in given else None
    nodes = nodes_named(given["nodes"]) if "nodes" in given else None
    accounts = set(given["accounts"].split(",")) if "accounts" in given else None
    qos = set(given["qos"].split(",")) if "qos" in given else None
    found: list[Row] = []
    for job in sorted(_jobs(given, ids, start), key=lambda job: job["job_id"]):
        spec = job["spec"]
        labels = spec.get("labels") or {}
        asked = None if ids is None else [step for job_id, index, step in ids
                                          if words.named(job, [(job_id, None if index is None else {index})])]
        if (asked == [] or (names is not None and spec["name"] not in names)
                or (partitions is not None and spec.get("partition") not in partitions)
                or (nodes is not None and nodes.isdisjoint(job.get("node_names") or ()))
                or (accounts is not None and labels.get("account") not in accounts)
                or (qos is not None and labels.get("qos") not in qos)):
            continue
        steps = [step for step in job.get("steps") or ()
                 if asked is None or None in asked or step_name(job, step["step_id"]) in asked]
        windowed = ids is None or states is not None or "start" in given or "end" in given
        # named by -j, a job is shown though it was never eligible (held), as Slurm's sacct shows it
        eligible = _eligible(job) if ids is None else float(job["submit_time"])
        if windowed and not _in_window(job, states, start, end, eligible):
            continue
        if asked is None or None in asked:
            found.append((job, None))
        if not given.get("allocations"):
            found.extend((job, step) for step in steps)
    return found


def cell(column: Column, row: Row, now: float) -> str | None:
    value = column[2]
    return None if value is None else value(*row, now)


def justified(text: str, width: int) -> str:
    """Right-justified in ``width`` (left in ``-width``), and the space that ends every column."""
    return (text.rjust(width) if width > 0 else text.ljust(-width)) + " "


def fixed(text: str | None, width: int) -> str:
    """A value as sacct prints it in columns: cut to its width with a ``+`` where it did not fit."""
    size = abs(width)
    return justified(" " if text is None else text if len(text) <= size else text[:size - 1] + "+", width)


def lines(columns: list[Column], found: list[Row], given: dict[str, Any], now: float) -> list[str]:
    parsable = given.get("parsable2") or given.get("parsable")
    header = not given.get("noheader")
    if parsable:
        delimiter = given.get("delimiter") or "|"
        ending = "" if given.get("parsable2") else delimiter
        out = [delimiter.join(name for name, _, _ in columns) + ending] if header else []
        return out + [delimiter.join(cell(column, row, now) or "" for column in columns) + ending for row in found]
    out = [] if not header else ["".join(justified(name[:abs(width)], width) for name, width, _ in columns),
                                 "".join("-" * abs(width) + " " for _, width, _ in columns)]
    return out + ["".join(fixed(cell(column, row, now), column[1]) for column in columns) for row in found]


def _help_format() -> str:
    names = list(FIELDS)
    return "\n".join("".join(f"{name:<20}" for name in names[at:at + 4]).rstrip() for at in range(0, len(names), 4))


def sacct(arguments: list[str]) -> int:
    given, operands = options("sacct", arguments, FLAGS, USAGE)
    if given.get("helpformat"):
        print(_help_format())
        return 0
    if operands:
        raise SlurmError(f"Unknown arguments: {' '.join(operands)}")
    text = given.get("format") or (BRIEF if given.get("brief") else LONG if given.get("long")
                                   else os.environ.get("SACCT_FORMAT") or DEFAULT)
    columns = columns_of(text)
    now = time.time()
    out = lines(columns, rows(given, now), given, now)
    if out:
        print("\n".join(out))
    return 0


def main(arguments: list[str] | None = None) -> None:
    run("sacct", sacct, arguments)


if __name__ == "__main__":
    main()
