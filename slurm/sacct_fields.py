"""sacct(1)'s fields: each one's name, its width as Slurm prints it (negative: left-justified) and how it reads a
row, the allocation of a job (``step`` None) or one of its steps. A field gangsched does not measure (disk,
energy, virtual memory, CPU frequency, ...) is printed empty, as Slurm prints one its plugins did not gather:
docs/slurm.md lists which."""

from __future__ import annotations

import re
from collections.abc import Callable

from gangsched.slurm import words

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

    Job = dict[str, Any]
    Step = dict[str, Any] | None  # None: the allocation's row
    Value = Callable[[Job, Step, float], str | None]

_CANCELLED_BY = re.compile(r"cancelled by (\S+)")
_UNITS = "KMGTP"


def _job_id(job: Job, step: Step, now: float) -> str:
    shown = words.job_id(job)
    return shown if step is None else f"{shown}.{words.step_name(job, step['step_id'])}"


def _raw_id(job: Job, step: Step, now: float) -> str:
    return str(job["job_id"]) if step is None else f"{job['job_id']}.{words.step_name(job, step['step_id'])}"


def _name(job: Job, step: Step, now: float) -> str:
    if step is None:
        return str(job["spec"]["name"])
    first = words.first_step(job)
    return first if first is not None and step["step_id"] == 0 else str(step["name"])


def _uid_of(user: str) -> str:
    import pwd

    try:
        return str(pwd.getpwnam(user).pw_uid)
    except KeyError:
        return user


def _state(job: Job, step: Step, now: float) -> str:
    """The state's name; a cancelled job's allocation as ``CANCELLED by UID``, the uid of whoever cancelled it."""
    item = job if step is None else step
    name = words.STATES[item["state"]][0]
    if item["state"] != "cancelled" or step is not None:
        return name
    found = _CANCELLED_BY.match(job.get("reason") or "")
    return f"{name} by {_uid_of(found[1] if found else job['spec']['user'])}"


def _exit(job: Job, step: Step, now: float) -> str:
    """``N:S``; a cancelled allocation's without its step's signal (``0:0``), as Slurm's accounting keeps it."""
    if step is None and job["state"] == "cancelled" and job.get("exit_code") is None:
        return "0:0"
    return words.exit_code(job if step is None else step)


def _derived_exit(job: Job, step: Step, now: float) -> str | None:
    """The largest exit of the job's steps (Slurm's DerivedExitCode), on the allocation's row."""
    if step is not None:
        return None
    codes = [each["exit_code"] for each in job.get("steps") or () if each.get("exit_code") is not None]
    return words.exit_code({"state": "completed", "exit_code": max(codes, key=abs) if codes else 0})


def _elapsed_s(job: Job, step: Step, now: float) -> float:
    return words.run_time(job if step is None else step, now)


def _cpus(job: Job, step: Step, now: float) -> str:
    if step is None:
        return str(words.cpus(job["spec"]) if job.get("node_names") or job["state"] == "pending" else 0)
    return str(words.cpus(job["spec"], step["tasks"]))


def _date(key: str) -> Value:
    return lambda job, step, now: words.clock((job if step is None else step).get(key))


def _eligible(job: Job, step: Step, now: float) -> str:
    if step is not None:
        return words.clock(step.get("start_time"))
    return "Unknown" if job.get("hold") and job["state"] == "pending" else words.clock(job["submit_time"])


def _nodes(job: Job, step: Step, now: float) -> str:
    if step is not None:
        return words.node_list({"node_names": step["nodes"]})
    return words.node_list(job) if job.get("node_names") else "None assigned"


def _node_count(job: Job, step: Step, now: float) -> str:
    return str(len(step["nodes"]) if step is not None else words.node_count(job))


def _alloc_nodes(job: Job, step: Step, now: float) -> str:
    return str(len(step["nodes"]) if step is not None else len(set(job.get("node_names") or ())))


def _allocation(read: Callable[[Job], str | None]) -> Value:
    """A field of the allocation alone: its steps' rows leave it empty, as Slurm's do."""
    return lambda job, step, now: read(job) if step is None else None


def _label(name: str) -> Value:
    return lambda job, step, now: (job["spec"].get("labels") or {}).get(name)


def _limit_minutes(job: Job) -> str:
    limit = job["spec"].get("estimate_s")
    return "UNLIMITED" if limit is None else str(int(limit // 60))


def _memory(job: Job, step: Step, now: float) -> str:
    spec = job["spec"]
    size = spec.get("mem_per_node") or spec.get("mem_per_cpu") or 0
    return f"{size // (1024 * 1024)}M"


def _tres(job: Job, step: Step, now: float) -> str | None:
    if step is None and not job.get("node_names"):
        return None
    cpus, nodes = int(_cpus(job, step, now)), int(_alloc_nodes(job, step, now))
    spec = job["spec"]
    memory = (spec.get("mem_per_node") or 0) * nodes or (spec.get("mem_per_cpu") or 0) * cpus
    parts = [f"cpu={cpus}"] + ([f"mem={memory // (1024 * 1024)}M"] if memory else [])
    return ",".join([*parts, f"node={nodes}"])


def _cpu_s(job: Job, step: Step) -> float:
    return float((job if step is None else step).get("cpu_s") or 0.0)


def cpu_time(seconds: float) -> str:
    """A measure of CPU time as sacct prints it: ``MM:SS.mmm`` under an hour, else ``[D-]HH:MM:SS``."""
    if seconds >= 3600:
        return words.hours(seconds)
    whole = int(seconds)
    return f"{whole // 60:02d}:{whole % 60:02d}.{int((seconds - whole) * 1000):03d}"


def size(kilobytes: float) -> str:
    """Bytes in Slurm's units: kilobytes, or the largest unit that leaves at least one (``2136K``, ``1.50G``)."""
    unit = 0
    while kilobytes >= 1024 and unit < len(_UNITS) - 1:
        kilobytes, unit = kilobytes / 1024, unit + 1
    number = f"{kilobytes:.0f}" if kilobytes == int(kilobytes) else f"{kilobytes:.2f}"
    return number + _UNITS[unit]


def _max_rss(job: Job, step: Step, now: float) -> str | None:
    if step is None:
        return None
    return size(int(step.get("max_rss") or 0) // 1024)


def _suspended(job: Job, step: Step, now: float) -> str:
    spans = [(each.get("end") or now) - each["start"] for each in job.get("preemptions") or ()]
    return words.hours(sum(spans))


def _group(job: Job, numeric: bool) -> str:
    import grp
    import pwd

    try:
        gid = pwd.getpwnam(job["spec"]["user"]).pw_gid
    except KeyError:
        return ""
    if numeric:
        return str(gid)
    try:
        return grp.getgrgid(gid).gr_name
    except KeyError:
        return str(gid)


def _reason(job: Job) -> str:
    return str(job.get("waits_for") or "None") if job["state"] == "pending" else "None"


# name: (width, value); in Slurm's order, which the prefix a format names a field by is matched against
FIELDS: dict[str, tuple[int, Value | None]] = {
    "Account": (10, _label("account")),
    "AdminComment": (15, None),
    "AllocCPUS": (10, _cpus),
    "AllocGRES": (12, None),
    "AllocNodes": (10, _alloc_nodes),
    "AllocTRES": (10, _tres),
    "AssocID": (7, None),
    "AveCPU": (10, None),
    "AveCPUFreq": (10, None),
    "AveDiskRead": (14, None),
    "AveDiskWrite": (14, None),
    "AvePages": (10, None),
    "AveRSS": (10, None),
    "AveVMSize": (10, None),
    "BlockID": (16, None),
    "Cluster": (10, None),
    "Comment": (14, _label("comment")),
    "Constraints": (19, None),
    "ConsumedEnergy": (14, None),
    "ConsumedEnergyRaw": (17, None),
    "Container": (19, None),
    "CPUTime": (10, lambda job, step, now: words.hours(_elapsed_s(job, step, now) * int(_cpus(job, step, now)))),
    "CPUTimeRAW": (10, lambda job, step, now: str(int(_elapsed_s(job, step, now) * int(_cpus(job, step, now))))),
    "DBIndex": (7, None),
    "DerivedExitCode": (15, _derived_exit),
    "Elapsed": (10, lambda job, step, now: words.hours(_elapsed_s(job, step, now))),
    "ElapsedRaw": (10, lambda job, step, now: str(int(_elapsed_s(job, step, now)))),
    "Eligible": (19, _eligible),
    "End": (19, _date("end_time")),
    "ExitCode": (8, _exit),
    "Flags": (19, None),
    "GID": (6, _allocation(lambda job: _group(job, numeric=True))),
    "Group": (9, _allocation(lambda job: _group(job, numeric=False))),
    "JobID": (-12, _job_id),
    "JobIDRaw": (-12, _raw_id),
    "JobName": (10, _name),
    "Layout": (9, None),
    "MaxDiskRead": (12, None),
    "MaxDiskReadNode": (15, None),
    "MaxDiskReadTask": (15, None),
    "MaxDiskWrite": (12, None),
    "MaxDiskWriteNode": (16, None),
    "MaxDiskWriteTask": (16, None),
    "MaxPages": (8, None),
    "MaxPagesNode": (12, None),
    "MaxPagesTask": (14, None),
    "MaxRSS": (10, _max_rss),
    "MaxRSSNode": (10, None),
    "MaxRSSTask": (10, None),
    "MaxVMSize": (10, None),
    "MaxVMSizeNode": (14, None),
    "MaxVMSizeTask": (14, None),
    "McsLabel": (12, None),
    "MinCPU": (10, None),
    "MinCPUNode": (10, None),
    "MinCPUTask": (10, None),
    "NCPUS": (10, _cpus),
    "NNodes": (8, _node_count),
    "NodeList": (15, _nodes),
    "NTasks": (8, lambda job, step, now: None if step is None else str(step["tasks"])),
    "Partition": (10, _allocation(lambda job: job["spec"].get("partition") or "")),
    "Priority": (10, None),
    "QOS": (10, _label("qos")),
    "QOSRAW": (6, None),
    "Reason": (22, _allocation(_reason)),
    "ReqCPUFreq": (10, None),
    "ReqCPUFreqGov": (13, None),
    "ReqCPUFreqMax": (13, None),
    "ReqCPUFreqMin": (13, None),
    "ReqCPUS": (8, _allocation(lambda job: str(words.cpus(job["spec"])))),
    "ReqGRES": (12, None),
    "ReqMem": (10, _memory),
    "ReqNodes": (8, _allocation(lambda job: str(job["spec"].get("nodes") or 1))),
    "ReqTRES": (10, None),
    "Reservation": (20, _allocation(lambda job: job["spec"].get("reservation") or "")),
    "ReservationId": (8, None),
    "Reserved": (10, None),
    "ResvCPU": (10, None),
    "ResvCPURAW": (10, None),
    "Start": (19, _date("start_time")),
    "State": (10, _state),
    "Submit": (19, lambda job, step, now: words.clock(job["submit_time"] if step is None else step["start_time"])),
    "SubmitLine": (20, None),
    "Suspended": (10, _suspended),
    "SystemComment": (15, None),
    "SystemCPU": (10, None),
    "Timelimit": (10, _allocation(lambda job: words.hours(job["spec"].get("estimate_s")))),
    "TimelimitRaw": (10, _allocation(_limit_minutes)),
    "TotalCPU": (10, lambda job, step, now: cpu_time(_cpu_s(job, step))),
    "TRESUsageInAve": (14, None),
    "TRESUsageInMax": (14, None),
    "TRESUsageInMaxNode": (18, None),
    "TRESUsageInMaxTask": (18, None),
    "TRESUsageInMin": (14, None),
    "TRESUsageInMinNode": (18, None),
    "TRESUsageInMinTask": (18, None),
    "TRESUsageInTot": (14, None),
    "TRESUsageOutAve": (15, None),
    "TRESUsageOutMax": (15, None),
    "TRESUsageOutMaxNode": (19, None),
    "TRESUsageOutMaxTask": (19, None),
    "TRESUsageOutMin": (15, None),
    "TRESUsageOutMinNode": (19, None),
    "TRESUsageOutMinTask": (19, None),
    "TRESUsageOutTot": (15, None),
    "UID": (6, _allocation(lambda job: _uid_of(job["spec"]["user"]))),
    "User": (9, _allocation(lambda job: str(job["spec"]["user"]))),
    "UserCPU": (10, None),
    "WCKey": (10, _label("wckey")),
    "WCKeyID": (7, None),
    "WorkDir": (20, lambda job, step, now: job["spec"].get("cwd") or ""),
}
