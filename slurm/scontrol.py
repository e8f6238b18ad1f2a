"""``scontrol``, as scontrol(1) shows and changes jobs: ``show job|partition|node|config|hostnames``
(``Key=Value`` records, ``-o`` one line each), ``hold``, ``release``, ``requeue``, ``suspend``, ``resume`` and
``update JobId=N Key=Value...``, over the master's own job actions (docs/operations.md, "Jobs"). Slurm's
words for what it refuses: another user's job, an unknown id, a value it would not read."""

from __future__ import annotations

import os
import sys
import time

from gangsched.client.connection import RequestRefused, login_name
from gangsched.protocol.durations import DurationError
from gangsched.protocol.frames import pack
from gangsched.slurm import words
from gangsched.slurm.command import SlurmError, master, options, run
from gangsched.slurm.getopt import table

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

USAGE = ("[<OPTION>] [<COMMAND>]\n  show job|partition|node|config|hostnames [NAME], "
         "hold|release|requeue|suspend|resume JOBID..., update JobId=N KEY=VALUE...")
FLAGS = table((
    (("-o", "--oneliner"), False, "oneliner"), (("-d", "--details"), False, "ignored"),
    (("-a", "--all"), False, "ignored"), (("-Q", "--quiet"), False, "quiet"), (("-v", "--verbose"), False, "ignored"),
    (("-M", "--clusters"), True, "ignored"), (("-h", "--help"), False, "help"), (("--usage",), False, "help"),
    (("-V", "--version"), False, "version"),
))
ACTIONS = ("hold", "uhold", "release", "requeue", "suspend", "resume")
_ACTION_ERRORS = {"suspend": "slurm_suspend error", "resume": "slurm_suspend error", "requeue": "slurm_requeue error"}
MEGABYTE = 1024 * 1024
_SINGULAR = {"jobs": "job", "partitions": "partition", "nodes": "node", "hostname": "hostnames"}


def record(pairs: list[list[tuple[str, str]]], oneliner: bool) -> str:
    """Lines of ``Key=Value`` as scontrol prints them: three spaces before each line but the first."""
    lines = [" ".join(f"{key}={value}" for key, value in line) for line in pairs]
    return " ".join(lines) if oneliner else "\n   ".join(lines) + "\n"


def _account(user: str) -> tuple[str, str]:
    import grp
    import pwd

    try:
        entry = pwd.getpwnam(user)
    except KeyError:
        return f"{user}(?)", "(null)(?)"
    try:
        group = grp.getgrgid(entry.pw_gid).gr_name
    except KeyError:
        group = str(entry.pw_gid)
    return f"{user}({entry.pw_uid})", f"{group}({entry.pw_gid})"


def _output(job: dict[str, Any], pattern: str | None) -> str:
    from gangsched.protocol.output_pattern import expand

    spec = job["spec"]
    if pattern is None:
        return "/dev/null" if job.get("batch") else "(null)"
    nodes = job.get("node_names") or []
    values = {"j": job["job_id"], "x": spec["name"], "u": spec["user"], "A": spec.get("array_job_id") or job["job_id"],
              "a": spec.get("array_index") if spec.get("array_index") is not None else 4294967294,
              "N": nodes[0] if nodes else "", "n": 0, "s": "batch", "t": 0, "J": f"{job['job_id']}.batch"}
    path = expand(pattern, values, final=True)
    return path if os.path.isabs(path) else os.path.join(spec.get("cwd") or spec.get("submit_dir") or "", path)


def job_record(job: dict[str, Any], now: float, oneliner: bool) -> str:
    spec = job["spec"]
    labels = spec.get("labels") or {}
    user, group = _account(spec["user"])
    runs = words.run_time(job, now)
    limit = spec.get("estimate_s")
    start, end = job.get("start_time"), job.get("end_time")
    eligible = max(job["submit_time"], spec.get("begin_time") or 0)
    if start is None and job["state"] == "pending" and spec.get("begin_time"):
        start = eligible  # Slurm's StartTime of a job waiting for its --begin
    if end is None and start is not None and limit is not None:
        end = start + limit
    first = [("JobId", str(job["job_id"]))]
    if spec.get("array_job_id") is not None:
        first += [("ArrayJobId", str(spec["array_job_id"])), ("ArrayTaskId", str(spec["array_index"]))]
    nodes = words.node_list(job)
    tasks, cpus, per_task = spec["tasks"], words.cpus(spec), spec.get("cpus_per_task", 1)
    memory = spec.get("mem_per_node") or (spec.get("mem_per_cpu") or 0) * cpus
    tres = f"cpu={cpus},node={words.node_count(job)}" + (f",mem={memory // MEGABYTE}M" if memory else "")
    pairs = [
        first + [("JobName", spec["name"])],
        [("UserId", user), ("GroupId", group), ("MCS_label", "N/A")],
        [("Priority", str(int(spec.get("priority", 0) * 4294967294) if job.get("hold") is None else 0)),
         ("Nice", "0"), ("Account", labels.get("account") or "(null)"), ("QOS", labels.get("qos") or "(null)")],
        [("JobState", words.state_name(job)), ("Reason", words.reason(job)),
         ("Dependency", words.dependency(job))],
        [("Requeue", "1" if spec.get("requeue") else "0"), ("Restarts", str(job.get("requeues", 0))),
         ("BatchFlag", "1" if job.get("batch") else "0"), ("Reboot", "0"),
         ("ExitCode", words.exit_code(job))],
        [("RunTime", words.hours(runs)), ("TimeLimit", words.hours(limit)), ("TimeMin", "N/A")],
        [("SubmitTime", words.clock(job["submit_time"])), ("EligibleTime", words.clock(eligible))],
        [("StartTime", words.clock(start)), ("EndTime", words.clock(end)), ("Deadline", "N/A")],
        [("Partition", str(spec.get("partition") or "")),
         ("AllocNode:Sid", f"{spec.get('submit_host') or '(null)'}:0")],
        [("ReqNodeList", "(null)"), ("ExcNodeList", "(null)")],
        [("NodeList", nodes or "(null)")],
        *([[("BatchHost", job["node_names"][0])]] if job.get("node_names") else []),
        [("NumNodes", str(words.node_count(job))), ("NumCPUs", str(cpus)), ("NumTasks", str(tasks)),
         ("CPUs/Task", str(per_task))],
        [("TRES", tres)],
        [("MinCPUsNode", str(per_task)), ("MinMemoryNode", f"{(spec.get('mem_per_node') or 0) // MEGABYTE}M"
                                if spec.get("mem_per_node") else "0"),
         ("MinTmpDiskNode", "0")],
        [("OverSubscribe", "NO" if spec.get("exclusive") else "OK"), ("Contiguous", "0"),
         ("Licenses", labels.get("licenses") or "(null)"), ("Network", "(null)")],
        [("Command", "(null)" if spec.get("argv", [None])[:1] == ["wrap"] else " ".join(spec.get("argv") or []))],
        [("WorkDir", str(spec.get("cwd") or ""))],
        *([[("Comment", labels["comment"])]] if labels.get("comment") else []),
        [("StdErr", _output(job, spec.get("error") or spec.get("output")))],
        [("StdIn", "/dev/null")],
        [("StdOut", _output(job, spec.get("output")))],
    ]
    if job["state"] == "pending" and job.get("reason") and job["reason"] != words.reason(job):
        pairs.append([("ReasonDetail", job["reason"])])  # gangsched's sentence, beside Slurm's word
    return record(pairs, oneliner)


def partition_record(partition: dict[str, Any], nodes: dict[str, dict[str, Any]], oneliner: bool) -> str:
    from gangsched.protocol.durations import format_duration
    from gangsched.protocol.hostlists import collect_hostlist

    names = partition["nodes"]
    cpus = sum(nodes[name]["processors"] for name in names if name in nodes)
    allowed = partition.get("allow_users")
    max_time = partition.get("max_time_s")
    pairs = [
        [("PartitionName", partition["name"])],
        [("AllowGroups", "ALL"), ("AllowAccounts", "ALL"), ("AllowQos", "ALL")],
        [("AllowUsers", ",".join(allowed) if allowed is not None else "ALL"),
         ("Default", "YES" if partition["default"] else "NO")],
        [("MaxNodes", "UNLIMITED"), ("MaxTime", "UNLIMITED" if max_time is None else format_duration(max_time)),
         ("MinNodes", "0")],
        [("Nodes", collect_hostlist(names) if names else "(null)")],
        [("PriorityTier", str(partition["priority_tier"])), ("OverSubscribe", f"FORCE:{partition['mpl']}")],
        [("PreemptMode", str(partition["preempt_mode"]).upper())],
        [("State", str(partition["state"]).upper()), ("TotalCPUs", str(cpus)), ("TotalNodes", str(len(names)))],
        [("Scheduler", f"gang:{partition['policy']}"), ("Quantum", f"{partition['quantum_ms']}ms")],
    ]
    return record(pairs, oneliner)


def node_state(node: dict[str, Any]) -> str:
    """Slurm's word for a node: IDLE, MIXED or ALLOCATED by the processors its jobs take, or its admin state."""
    if node["state"] == "up":
        used = len(node.get("jobs") or ())
        return "IDLE" if not used else "ALLOCATED" if node.get("processors_used", 0) >= node["processors"] else "MIXED"
    if node["state"] == "draining":
        return "MIXED+DRAIN" if node.get("jobs") else "IDLE+DRAIN"
    return "IDLE+DRAIN" if node["state"] == "drained" else "DOWN"


def node_record(node: dict[str, Any], oneliner: bool) -> str:
    reason = node.get("reason")
    pairs = [
        [("NodeName", node["name"])],
        [("CPUAlloc", str(node.get("processors_used", 0))), ("CPUTot", str(node["processors"])),
         ("CPULoad", f"{node.get('cpu_share', 0.0):.2f}")],
        [("RealMemory", str(node.get("memory", 0) // MEGABYTE)),
         ("AllocMem", str(node.get("memory_committed", 0) // MEGABYTE))],
        [("State", node_state(node))],
        [("Partitions", ",".join(node.get("partitions") or ()))],
        *([[("Reason", f"{reason['text']} [{reason['user']}@{words.clock(reason['time'])}]")]] if reason else []),
    ]
    return record(pairs, oneliner)


def config_lines(connection_endpoint: str, partitions: list[dict[str, Any]]) -> str:
    rows = [("ClusterName", os.environ.get("SLURM_CLUSTER_NAME", "gangsched")),
            ("SchedulerType", "gangsched (gang scheduling, docs/architecture.md)"),
            ("SlurmctldHost", connection_endpoint),
            ("PartitionNames", ",".join(partition["name"] for partition in partitions))]
    width = max(len(key) for key, _ in rows)
    header = f"Configuration data as of {words.clock(time.time())}"
    return "\n".join([header, *(f"{key.ljust(width)} = {value}" for key, value in rows)])


def _ids(words_given: list[str]) -> list[int]:
    found: list[int] = []
    for word in ",".join(words_given).split(","):
        if not word.isdigit():
            raise SlurmError(f"Invalid job id specified for job {word}", whole=True)
        found.append(int(word))
    return found


def show(entity: str, name: str | None, oneliner: bool) -> int:
    if entity == "hostnames":
        from gangsched.protocol.hostlists import expand_hostlist

        text = name or os.environ.get("SLURM_JOB_NODELIST")
        if not text:
            raise SlurmError("No list of hosts specified", whole=True)
        try:
            print("\n".join(expand_hostlist(text)))
        except ValueError as error:
            raise SlurmError(str(error)) from None
        return 0
    with master() as connection:
        if entity == "job":
            if name is None:
                jobs = connection.job_maps(brief=True)
            else:
                if not name.isdigit():
                    raise SlurmError(f"Invalid job id specified for job {name}", whole=True)
                jobs = connection.job_maps([int(name)], brief=True)
                if not jobs:
                    raise SlurmError("slurm_load_jobs error: Invalid job id specified", whole=True)
            now = time.time()
            print("\n".join(job_record(job, now, oneliner) for job in jobs) if jobs else "No jobs in the system")
            return 0
        listing = connection.node_list_map()
        nodes = {node["name"]: node for node in listing["nodes"]}
        if entity == "config":
            print(config_lines(connection.endpoint, listing["partitions"]))
            return 0
        if entity == "partition":
            partitions = [p for p in listing["partitions"] if name is None or p["name"] == name]
            if not partitions:
                raise SlurmError(f"Partition {name} not found", whole=True)
            print("\n".join(partition_record(p, nodes, oneliner) for p in partitions))
            return 0
        chosen = [node for node in listing["nodes"] if name is None or node["name"] == name]
        if not chosen:
            raise SlurmError(f"Node {name} not found", whole=True)
        print("\n".join(node_record(node, oneliner) for node in chosen))
        return 0


def act(action: str, job_ids: list[int]) -> int:
    """hold, release, requeue, suspend, resume: each job apart, as scontrol asks for each."""
    status = 0
    me = login_name()
    with master() as connection:
        for job_id in job_ids:
            try:
                connection.exchange(pack({"type": "job_control", "user": me,
                                          "action": "hold" if action == "uhold" else action, "job_ids": [job_id]}))
            except RequestRefused as error:
                print(_refusal(job_id, error), file=sys.stderr)
                status = 1
    return status


def _refusal(job_id: int, error: RequestRefused) -> str:
    return f"{words.refusal(error.code, error.reason)} for job {job_id}"


def update(settings: list[str]) -> int:
    from gangsched.cli.job_control import UPDATABLE, setting_value

    fields: dict[str, Any] = {}
    job_id: int | None = None
    for setting in settings:
        key, equals, value = setting.partition("=")
        if key.lower() in ("jobid", "job"):
            if not value.isdigit():
                raise SlurmError(f"Invalid job id specified for job {value}", whole=True)
            job_id = int(value)
            continue
        field = UPDATABLE.get(key.lower().replace("_", ""))
        if not equals or field is None:
            raise SlurmError(f"Update of this parameter is not supported: {setting}\nRequest aborted", whole=True)
        try:
            fields[field] = setting_value(field, value)
        except (ValueError, DurationError):
            raise SlurmError(f"Invalid {key} value") from None
    if job_id is None:
        raise SlurmError("No valid entity in update command\nInput line must include \"NodeName\", "
                         "\"PartitionName\", \"Reservation\", \"JobId\" ...", whole=True)
    with master() as connection:
        try:
            connection.exchange(pack({"type": "job_update", "user": login_name(), "job_id": job_id, **fields}))
        except RequestRefused as error:
            raise SlurmError(_refusal(job_id, error), whole=True) from None
    return 0


def scontrol(arguments: list[str]) -> int:
    given, operands = options("scontrol", arguments, FLAGS, USAGE)
    if not operands:  # Slurm's reads commands from its input then: one at a time here
        raise SlurmError(f"Usage: scontrol {USAGE}", whole=True)
    keyword, rest = operands[0].lower(), operands[1:]
    if keyword == "show":
        entities = ("job", "jobs", "partition", "partitions", "node", "nodes", "config", "hostnames", "hostname")
        entity = rest[0].lower() if rest else ""
        if entity not in entities:
            raise SlurmError(f"invalid entity:{rest[0] if rest else ''} for keyword:show ", whole=True)
        entity = _SINGULAR.get(entity, entity)
        return show(entity, rest[1] if len(rest) > 1 else None, bool(given.get("oneliner")))
    if keyword in ACTIONS:
        if not rest:
            raise SlurmError(f"too few arguments for keyword:{keyword}", whole=True)
        return act(keyword, _ids(rest))
    if keyword == "update":
        return update(rest)
    raise SlurmError(f"invalid keyword: {operands[0]}", whole=True)


def main(arguments: list[str] | None = None) -> None:
    run("scontrol", scontrol, arguments)


if __name__ == "__main__":
    main()
