"""``squeue``, as squeue(1) prints jobs: its default and long formats, ``-o`` with ``%`` codes and widths,
``-O`` fields, the filters ``-j -u --me -n -p -t -w``, ``-r`` (each pending array's jobs one by one), ``-h``.
Jobs in Slurm's order: by state code, a held job after the others of its state, then by id."""

from __future__ import annotations

import os
import time
from collections.abc import Callable

from gangsched.protocol.durations import format_duration
from gangsched.slurm import columns, words
from gangsched.slurm.columns import Column
from gangsched.slurm.command import SlurmError, master, nodes_named, options, run, users_named
from gangsched.slurm.getopt import table

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

    Field = Callable[[dict[str, Any], float], str]

DEFAULT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"
LONG = "%.18i %.9P %.8j %.8u %.8T %.10M %.9l %.6D %R"
FIELD_WIDTH = 20  # -O's, for a field without one of its own

USAGE = ("[-A account] [--clusters names] [-i seconds] [--job jobid] [-n name] [-o format] "
         "[-O fields] [-p partitions] [--qos qos] [--reservation reservation] [--sort fields] "
         "[--start] [--step step_id] [-t states] [-u user_name] [--usage] [-w nodes] [-ahjlrsv]")
FLAGS = table((
    (("-h", "--noheader"), False, "noheader"), (("-o", "--format"), True, "format"),
    (("-O", "--Format"), True, "fields"), (("-t", "--states"), True, "states"), (("-j", "--jobs"), True, "jobs"),
    (("-u", "--user"), True, "user"), (("--me",), False, "me"), (("-n", "--name"), True, "name"),
    (("-p", "--partition"), True, "partition"), (("-w", "--nodelist"), True, "nodes"),
    (("-r", "--array"), False, "array"), (("-l", "--long"), False, "long"), (("-a", "--all"), False, "all"),
    (("-A", "--account"), True, "account"), (("-q", "--qos"), True, "qos"), (("-M", "--clusters"), True, "ignored"),
    (("-v", "--verbose"), False, "ignored"), (("--help",), False, "help"), (("--usage",), False, "help"),
    (("-V", "--version"), False, "version"),
))


def _limit(job: dict[str, Any], now: float) -> str:
    return format_duration(job["spec"].get("estimate_s"))


def _left(job: dict[str, Any], now: float) -> str:
    limit = job["spec"].get("estimate_s")
    return "UNLIMITED" if limit is None else words.elapsed(limit - words.run_time(job, now))


def _end(job: dict[str, Any], now: float) -> str:
    if job.get("end_time") is not None:
        return words.clock(job["end_time"])
    if job.get("start_time") is None:
        return "N/A"
    limit = job["spec"].get("estimate_s")
    return "NONE" if limit is None else words.clock(job["start_time"] + limit)


def _nodes_or_reason(job: dict[str, Any], now: float) -> str:
    return f"({words.reason(job)})" if job["state"] == "pending" else words.node_list(job)


def _task_id(job: dict[str, Any], now: float) -> str:
    if job.get("array_pending") is not None:
        return words.array_pending(job)
    index = job["spec"].get("array_index")
    return "N/A" if index is None else str(index)


def _label(name: str) -> Field:
    return lambda job, now: str((job["spec"].get("labels") or {}).get(name) or "(null)")


def _memory(job: dict[str, Any], now: float) -> str:
    spec = job["spec"]
    size = spec.get("mem_per_node") or spec.get("mem_per_cpu")
    return "0" if not size else f"{size // (1024 * 1024)}M"


def _command(job: dict[str, Any], now: float) -> str:
    spec = job["spec"]
    argv = spec.get("argv") or []
    return "(null)" if job.get("batch") and argv[:1] == ["wrap"] else " ".join(argv)


def _uid(job: dict[str, Any], now: float) -> str:
    import pwd

    try:
        return str(pwd.getpwnam(job["spec"]["user"]).pw_uid)
    except KeyError:
        return str(job["spec"]["user"])


# each % code: its header and how it is read from a job
CODES: dict[str, tuple[str, Field]] = {
    "i": ("JOBID", lambda job, now: words.job_id(job)),
    "A": ("JOBID", lambda job, now: str(job["job_id"])),
    "F": ("ARRAY_JOB_ID", lambda job, now: str(job["spec"].get("array_job_id") or job["job_id"])),
    "K": ("ARRAY_TASK_ID", _task_id),
    "P": ("PARTITION", lambda job, now: str(job["spec"].get("partition") or "")),
    "j": ("NAME", lambda job, now: job["spec"]["name"]),
    "u": ("USER", lambda job, now: job["spec"]["user"]),
    "U": ("UID", _uid),
    "t": ("ST", lambda job, now: words.state_code(job)),
    "T": ("STATE", lambda job, now: words.state_name(job)),
    "M": ("TIME", lambda job, now: words.elapsed(words.run_time(job, now))),
    "l": ("TIME_LIMIT", _limit),
    "L": ("TIME_LEFT", _left),
    "D": ("NODES", lambda job, now: str(words.node_count(job))),
    "C": ("CPUS", lambda job, now: str(words.cpus(job["spec"]))),
    "R": ("NODELIST(REASON)", _nodes_or_reason),
    "r": ("REASON", lambda job, now: words.reason(job)),
    "N": ("NODELIST", lambda job, now: words.node_list(job)),
    "B": ("EXEC_HOST", lambda job, now: (job.get("node_names") or ["n/a"])[0]),
    "S": ("START_TIME", lambda job, now: words.clock(job.get("start_time"), "N/A")),
    "V": ("SUBMIT_TIME", lambda job, now: words.clock(job["submit_time"])),
    "e": ("END_TIME", _end),
    "Z": ("WORK_DIR", lambda job, now: str(job["spec"].get("cwd") or "")),
    "o": ("COMMAND", _command),
    "m": ("MIN_MEMORY", _memory),
    "E": ("DEPENDENCY", lambda job, now: words.dependency(job)),
    "a": ("ACCOUNT", _label("account")),
    "q": ("QOS", _label("qos")),
    "k": ("COMMENT", _label("comment")),
    "c": ("MIN_CPUS", lambda job, now: "1"),
    "h": ("OVER_SUBSCRIBE", lambda job, now: "NO" if job["spec"].get("exclusive") else "OK"),
    "y": ("NICE", lambda job, now: "0"),
}
# -O's field names (any case) and the code each prints
FIELDS = {
    "jobid": "A", "jobarrayid": "i", "arrayjobid": "F", "arraytaskid": "K", "partition": "P", "name": "j",
    "username": "u", "userid": "U", "statecompact": "t", "state": "T", "timeused": "M", "timelimit": "l",
    "timeleft": "L", "numnodes": "D", "numcpus": "C", "reasonlist": "R", "reason": "r", "nodelist": "N",
    "batchhost": "B", "starttime": "S", "submittime": "V", "endtime": "e", "workdir": "Z", "command": "o",
    "minmemory": "m", "dependency": "E", "account": "a", "qos": "q", "comment": "k", "mincpus": "c",
    "oversubscribe": "h", "nice": "y",
}
EXTRA_FIELDS: dict[str, tuple[str, Field]] = {
    "numtasks": ("TASKS", lambda job, now: str(job["spec"]["tasks"])),
    "cpus-per-task": ("CPUS_PER_TASK", lambda job, now: str(job["spec"].get("cpus_per_task", 1))),
    "stdout": ("STDOUT", lambda job, now: str(job["spec"].get("output") or "")),
    "stderr": ("STDERR", lambda job, now: str(job["spec"].get("error") or job["spec"].get("output") or "")),
    "exitcode": ("EXIT_CODE", lambda job, now: words.exit_code(job)),
}


def columns_of_format(text: str) -> list[Column | str]:
    """``-o``'s format: the columns and the text between them."""
    try:
        return columns.parse(text, CODES)
    except columns.FormatError as error:
        raise SlurmError(f"Invalid job format specification: {error}") from None


def columns_of_fields(text: str) -> list[Column | str]:
    """``-O``'s fields: ``name[:[.]width]`` by commas, each left-justified in 20 characters unless given."""
    parts: list[Column | str] = []
    for item in text.split(","):
        name, _, size = item.partition(":")
        key = name.lower()
        if key in FIELDS:
            header, field = CODES[FIELDS[key]]
            if key == "jobid":
                header = "JOBID"
        elif key in EXTRA_FIELDS:
            header, field = EXTRA_FIELDS[key]
        else:
            raise SlurmError(f"Invalid job format specification: {name}")
        right = size.startswith(".")
        width = size.lstrip(".")
        if width and not width.isdigit():
            raise SlurmError(f"Invalid job format specification: {item}")
        parts.append((header, field, int(width) if width else FIELD_WIDTH, right))
    return parts


def _ids(text: str) -> list[tuple[int, set[int] | None]]:
    """``-j``'s ids: a job's, or an array's job with one index (``12_3``)."""
    found: list[tuple[int, set[int] | None]] = []
    for word in text.split(","):
        job, _, index = word.partition("_")
        if not job.isdigit() or (index and not index.isdigit()):
            raise SlurmError(f"Invalid job id: {word}")
        found.append((int(job), {int(index)} if index else None))
    return found


def _order(job: dict[str, Any]) -> tuple[str, bool, int]:
    return words.state_code(job), job.get("hold") is not None, job["job_id"]


def listed(given: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs asked for, in Slurm's order."""
    try:
        states = words.states_asked(given["states"]) if "states" in given else set(words.ACTIVE)
    except words.StateError as error:
        raise SlurmError(f"Invalid job state specified: {error}\nsqueue: error: Valid job states include: "
                         f"{','.join(name for name, _ in words.STATES.values())}") from None
    ids = _ids(given["jobs"]) if "jobs" in given else None
    users = users_named(given["user"]) if "user" in given else None
    if given.get("me"):
        from gangsched.client.connection import login_name

        users = (users or set()) | {login_name()}
    one_by_one = bool(given.get("array")) or any(index is not None for _, index in ids or ())
    finished = states is None or not states <= set(words.ACTIVE)
    with master() as connection:
        jobs = connection.job_maps(include_finished=finished, arrays=not one_by_one, brief=True,
                                   user=next(iter(users)) if users is not None and len(users) == 1 else None,
                                   states=None if finished or states is None else states)
        if ids is not None:
            jobs = [job for job in jobs if words.named(job, ids)]
            if not jobs and not connection.job_maps([job_id for job_id, _ in ids], brief=True):
                raise SlurmError("slurm_load_jobs error: Invalid job id specified", whole=True) from None
    names = set(given["name"].split(",")) if "name" in given else None
    partitions = set(given["partition"].split(",")) if "partition" in given else None
    nodes = nodes_named(given["nodes"]) if "nodes" in given else None
    chosen = [job for job in jobs
              if (states is None or job["state"] in states)
              and (users is None or job["spec"]["user"] in users)
              and (names is None or job["spec"]["name"] in names)
              and (partitions is None or job["spec"].get("partition") in partitions)
              and (nodes is None or not nodes.isdisjoint(job.get("node_names") or ()))]
    return sorted(chosen, key=_order)


def squeue(arguments: list[str]) -> int:
    given, operands = options("squeue", arguments, FLAGS, USAGE)
    if operands:
        raise SlurmError(f"Unrecognized option: {operands[0]}\nUsage: squeue [-A account] [--clusters names] ...",
                         whole=True)
    if "fields" in given:
        parts = columns_of_fields(given["fields"])
    else:
        parts = columns_of_format(given.get("format") or os.environ.get("SQUEUE_FORMAT")
                                  or (LONG if given.get("long") else DEFAULT))
    jobs = listed(given)
    now = time.time()
    out: list[str] = []
    if given.get("long"):
        out.append(time.strftime("%a %b %d %H:%M:%S %Y", time.localtime(now)))
    if not given.get("noheader"):
        out.append(columns.header(parts))
    out.extend(columns.row(parts, job, now) for job in jobs)
    if out:
        print("\n".join(out))
    return 0


def main(arguments: list[str] | None = None) -> None:
    run("squeue", squeue, arguments)


if __name__ == "__main__":
    main()
