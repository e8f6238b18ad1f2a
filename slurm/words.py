"""A job as Slurm's commands print it (squeue(1), sacct(1), scontrol(1)): its state's name and code, its
reason as one word of Slurm's list, its exit as ``N:S``, its times and lengths of time as Slurm writes
them. Plain functions over the master's plain maps (JobInfo's fields), shared by every Slurm command."""

from __future__ import annotations

import signal
import time

from gangsched.protocol.array_ranges import compact, shown_job_id
from gangsched.protocol.dependency_text import dependency_text
from gangsched.protocol.durations import format_duration
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.step_names import first_step_name
from gangsched.protocol.step_names import step_name as named_step

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

# each state of gangsched's (protocol/records.py JobState) as Slurm names it, and its short code
STATES: dict[str, tuple[str, str]] = {
    "pending": ("PENDING", "PD"), "running": ("RUNNING", "R"), "suspended": ("SUSPENDED", "S"),
    "completed": ("COMPLETED", "CD"), "failed": ("FAILED", "F"), "cancelled": ("CANCELLED", "CA"),
    "timeout": ("TIMEOUT", "TO"), "node_fail": ("NODE_FAIL", "NF"), "out_of_memory": ("OUT_OF_MEMORY", "OOM"),
}
ACTIVE = ("pending", "running", "suspended")
# how a job ended, as the word squeue and scontrol give for its reason
_END_WORDS = {"failed": "NonZeroExitCode", "timeout": "TimeLimit", "node_fail": "NodeDown",
              "out_of_memory": "OutOfMemory"}
SIGTERM = 15  # what scancel sends: a job cancelled without an exit of its own ended by it
TIME_FORMAT = "%Y-%m-%dT%H:%M:%S"


# the master's refusals that Slurm's commands say in Slurm's own words (its slurm_strerror)
_REFUSALS = {ErrorCode.PERMISSION_DENIED: "Access/permission denied", ErrorCode.UNKNOWN_JOB: "Invalid job id specified"}


def first_step(job: dict[str, Any]) -> str | None:
    """The name of a job's step 0 where it is not a step of the job's own (``batch``, ``extern``)."""
    return first_step_name(bool(job.get("batch")), bool(job["spec"].get("allocation")))


def step_name(job: dict[str, Any], step_id: int) -> str:
    """Slurm's name of a job's step: its step 0 (``batch``, ``extern``), the others counted from 0 after it;
    a job of srun's own counts its steps from 0."""
    return named_step(first_step(job), step_id)


def refusal(code: ErrorCode, reason: str) -> str:
    """A refusal of the master's as Slurm's commands say it: Slurm's words where it has them, else the reason."""
    return _REFUSALS.get(code, reason)


class StateError(ValueError):
    """A state squeue or sacct does not know."""


def state_name(job: dict[str, Any]) -> str:
    return STATES[job["state"]][0]


def state_code(job: dict[str, Any]) -> str:
    return STATES[job["state"]][1]


def states_asked(text: str) -> set[str] | None:
    """The states ``-t``/``--states`` names, by Slurm's names or codes, any case; ``all``: None (every one)."""
    wanted: set[str] = set()
    by_word = {word: state for state, words in STATES.items() for word in words}
    for word in text.split(","):
        if word.lower() == "all":
            return None
        state = by_word.get(word.upper())
        if state is None:
            raise StateError(word)
        wanted.add(state)
    return wanted


def reason(job: dict[str, Any]) -> str:
    """Slurm's one word for why a job waits, or how it ended (``None`` when there is nothing to say)."""
    if job["state"] == "pending":
        return str(job.get("waits_for") or "None")
    return _END_WORDS.get(job["state"], "None")


def exit_code(job: dict[str, Any]) -> str:
    """Slurm's ``N:S``: the exit status, or the signal that ended it (a job cancelled without one: SIGTERM)."""
    code = job.get("exit_code")
    if code is None:
        return f"0:{SIGTERM}" if job["state"] == "cancelled" else "0:0"
    return f"0:{-code}" if code < 0 else f"{code}:0"


def job_id(job: dict[str, Any]) -> str:
    """The id Slurm shows: an array's job as ``ARRAY_INDEX``, a pending array's waiting ones as one."""
    spec = job["spec"]
    array_job = spec.get("array_job_id")
    if job.get("array_pending") is not None:
        return shown_job_id(job["job_id"], array_job, array_pending(job))
    return str(job["job_id"]) if array_job is None else f"{array_job}_{spec['array_index']}"


def dependency(job: dict[str, Any]) -> str:
    """What it waits for, as Slurm writes it (``afterok:12,afterany:13``); ``(null)`` for nothing."""
    return dependency_text(job["spec"]) or "(null)"


def named(job: dict[str, Any], ids: list[tuple[int, set[int] | None]]) -> bool:
    """Whether ``job`` is one the ids name: each a job's id (an array's job: all of the array), or an array's
    job with the indices of it asked for."""
    spec = job["spec"]
    for job_id, indices in ids:
        if indices is None and job_id in (job["job_id"], spec.get("array_job_id")):
            return True
        if indices is not None and spec.get("array_job_id") == job_id and spec.get("array_index") in indices:
            return True
    return False


def array_pending(job: dict[str, Any]) -> str:
    """A pending array's waiting indices as squeue shows them, with its throttle: ``3-5%2``."""
    limit = job["spec"].get("array_limit")
    return f"{job['array_pending']}%{limit}" if limit else str(job["array_pending"])


def clock(when: float | None, unknown: str = "Unknown") -> str:
    """A point in time as Slurm prints it, in this machine's local time."""
    return unknown if when is None else time.strftime(TIME_FORMAT, time.localtime(when))


def elapsed(seconds: float) -> str:
    """A length of time as squeue's TIME: ``M:SS``, ``H:MM:SS``, ``D-HH:MM:SS``, whole seconds gone by."""
    return format_duration(float(max(int(seconds), 0)))


def hours(seconds: float | None, unlimited: str = "UNLIMITED") -> str:
    """A length of time as sacct and scontrol print it: ``HH:MM:SS`` or ``D-HH:MM:SS``."""
    if seconds is None:
        return unlimited
    whole = max(int(seconds), 0)
    days, rest = divmod(whole, 86_400)
    text = f"{rest // 3600:02d}:{rest % 3600 // 60:02d}:{rest % 60:02d}"
    return f"{days}-{text}" if days else text


def run_time(job: dict[str, Any], now: float) -> float:
    """How long it has run: from its start to its end, or to now."""
    start = job.get("start_time")
    if start is None:
        return 0.0
    end = job.get("end_time")
    return float((now if end is None else end) - start)


def node_list(job: dict[str, Any]) -> str:
    """Its nodes as one hostlist; ClusterShell is imported only for more than one (a listing's start)."""
    names = list(dict.fromkeys(job.get("node_names") or ()))
    if len(names) < 2:
        return "".join(names)
    from gangsched.protocol.hostlists import collect_hostlist

    return collect_hostlist(names)


def cpus(spec: dict[str, Any], tasks: int | None = None) -> int:
    """The processors of ``tasks`` of the job (all of its tasks if None): each holds its -c of them."""
    return int(spec["tasks"] if tasks is None else tasks) * int(spec.get("cpus_per_task", 1))


def node_count(job: dict[str, Any]) -> int:
    names = job.get("node_names")
    if names:
        return len(set(names))
    spec = job["spec"]
    return int(spec.get("nodes") or 1)


def signal_number(text: str) -> int:
    """A signal by its number or its name, with or without ``SIG`` (``USR1``, ``SIGUSR1``, ``10``), as scancel
    and sbatch read it; ValueError if it is none."""
    import signal

    name = text.upper()
    try:
        number = int(name) if name.isdigit() else int(signal.Signals[name if name.startswith("SIG") else f"SIG{name}"])
    except KeyError:
        raise ValueError(text) from None
    if not 1 <= number <= 64:
        raise ValueError(text)
    return number


def task_failures(step: dict[str, Any]) -> list[str]:
    """srun's line for each node's failed tasks of ``step`` (StepInfo's ``failed_tasks``) that ended alike, as
    Slurm's: ``n1: tasks 0-1: Exited with exit code 3``, ``n2: task 2: Killed``."""
    alike: dict[tuple[str, int], list[int]] = {}
    for failure in step.get("failed_tasks") or ():
        alike.setdefault((failure["node"], failure["exit_code"]), []).append(failure["rank"])
    lines = []
    for (node, code), ranks in alike.items():
        ended = f"Exited with exit code {code}" if code > 0 else signal.strsignal(-code) or f"Signal {-code}"
        lines.append(f"{node}: task{'s' if len(ranks) > 1 else ''} {compact(ranks)}: {ended}")
    return lines
