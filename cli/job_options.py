"""The one table of a job's options: each row gang submit's spellings, sbatch's (where Slurm has the
option), its kind, the unit a bare number is in, its default and its help. The
click command (``submit``), its quick path for ordinary submissions (``quick_submit``) and a script's
``#GANG`` lines (read by the click command) are all made from it, so they cannot disagree
(tests/test_job_options.py gives every option by all three and compares the jobs).

Plain data, without click or pydantic: the quick path reads it while it starts (docs/limits.md, "A
submission's imports")."""

from __future__ import annotations

from gangsched.protocol.durations import parse_duration

TYPE_CHECKING = False  # typing's flag without its import (NamedTuple's and dataclasses' cost the quick path's start)
if TYPE_CHECKING:
    from collections.abc import Callable


class JobOption:
    """One option of a job: how gang submit spells it, what Slurm calls it, how its value is read."""

    __slots__ = ("name", "flags", "slurm", "kind", "help", "default", "unit", "metavar", "quick", "choices")

    def __init__(self, name: str, flags: tuple[str, ...], slurm: tuple[str, ...], kind: str, help: str,
                 default: object = None, unit: str | None = None, metavar: str | None = None, quick: bool = False,
                 choices: tuple[str, ...] = ()) -> None:
        self.name = name  # the key the command's code reads the value by
        self.flags = flags  # gang submit's spellings
        self.slurm = slurm  # sbatch's spellings of it (slurm/sbatch.py); none: gangsched's own
        # "count" (a whole number >= 1), "int", "float", "fraction" (0-1), "duration" (Slurm's [D-]HH:MM:SS
        # forms, a bare number in ``unit``), "time" (a point in time, Slurm's forms: protocol/times.py), "size",
        # "text", "path", "choice", "flag", "many" (repeatable text)
        self.kind = kind
        self.help = help
        self.default = default
        self.unit = unit  # a bare number's
        self.metavar = metavar
        self.quick = quick  # the quick path takes it (an ordinary submission's options)
        self.choices = choices


def _synthetic(name: str, kind: str, default: object, text: str) -> JobOption:
    return JobOption(name, (f"--{name.replace('_', '-')}",), (), kind, text, default)


OPTIONS: tuple[JobOption, ...] = (
    JobOption("tasks", ("-n", "--ntasks"), ("-n", "--ntasks"), "count",
              "tasks, each on --cpus-per-task processors [-N x --ntasks-per-node, or -N, or 1]", quick=True),
    JobOption("nodes", ("-N", "--nodes"), ("-N", "--nodes"), "count",
              "spread the tasks over exactly this many nodes [as few as they fit on]"),
    JobOption("tasks_per_node", ("--ntasks-per-node",), ("--ntasks-per-node",), "count",
              "at most this many tasks on each node"),
    JobOption("cpus_per_task", ("-c", "--cpus-per-task"), ("-c", "--cpus-per-task"), "count",
              "processors of each task, all on one node: the matrix, memory per cpu and its accounting count "
              "them all [1]", quick=True),
    JobOption("mem_per_node", ("--mem",), ("--mem",), "size",
              "memory on each node the job runs on, e.g. 300M or 2G (K, M, G, T; M if none), like sbatch's; its "
              "tasks there share it [the master's --default-mem-per-cpu per task]", unit="megabytes", metavar="SIZE"),
    JobOption("mem_per_cpu", ("--mem-per-cpu",), ("--mem-per-cpu",), "size",
              "memory per task instead: each task's limit", unit="megabytes", metavar="SIZE"),
    JobOption("mpi", ("--mpi",), (), "choice",
              "the process-manager interface the tasks speak: pmi1 (MPICH, mpi4py), pmi2 (Intel MPI with a PMI-2 "
              "library), pmix (Open MPI), none; list: what this cluster serves [the master's --mpi-default]",
              choices=("none", "pmi1", "pmi2", "pmix", "list")),
    JobOption("partition", ("-p", "--partition"), ("-p", "--partition"), "text",
              "the partition to run in; several by comma: the first that takes the job (gang nodes -s lists them) "
              "[the default partition]", metavar="NAME[,NAME...]", quick=True),
    JobOption("name", ("-J", "--name"), ("-J", "--job-name"), "text", "job name [the command's name]", quick=True),
    JobOption("exclusive", ("--exclusive",), ("--exclusive",), "flag", "never share a quantum with another slot",
              default=False),
    JobOption("estimate", ("-t", "--estimate"), ("-t", "--time"), "duration",
              "estimated run time, and its time limit: past it the job ends as TIMEOUT; a bare number is seconds "
              "(sbatch's minutes), or Slurm's MM:SS, HH:MM:SS, D-HH[:MM[:SS]] [the master's --default-estimate-s]",
              unit="seconds", metavar="TIME", quick=True),
    JobOption("priority", ("--priority",), (), "fraction",
              "your priority for this job (slack-based backfilling's UP)", default=0.0),
    JobOption("migratable", ("--migratable",), (), "flag",
              "the command checkpoints at barriers (jobs/runtime.py on_checkpoint); synthetic jobs always do",
              default=False),
    JobOption("requeue", ("--requeue",), ("--requeue",), "flag", "back to the queue if a node of the job is lost",
              default=False),
    JobOption("output", ("-o", "--output"), ("-o", "--output"), "text",
              "stdout+stderr file per task, %j job, %t rank, %A array job, %a array index, %% a % [the node's spool "
              "folder; with --follow gang-%j.%t.out]", quick=True),
    JobOption("error", ("-e", "--error"), ("-e", "--error"), "text",
              "stderr file per task apart from the output, with --output's patterns [with the output]", quick=True),
    JobOption("exports", ("--export",), (), "many", "set in the tasks' environment", default=(),
              metavar="KEY=VALUE"),
    JobOption("dependency", ("-d", "--dependency"), ("-d", "--dependency"), "text",
              "start after these jobs completed (afterok) or ended (afterany), comma-separated; cancelled if an "
              "afterok job fails", metavar="afterok:ID[:ID]|afterany:ID[:ID]"),
    JobOption("begin", ("--begin",), ("--begin",), "time",
              "do not start before this time, Slurm's forms: now+30minutes, 16:00, tomorrow, 2026-12-24T09:00 "
              "(pending as BeginTime until then)", metavar="TIME", quick=True),
    JobOption("array", ("-a", "--array"), ("-a", "--array"), "text",
              "one job per index, like Slurm's (GANG_ARRAY_JOB_ID, GANG_ARRAY_TASK_ID; %A, %a in --output); %N: at "
              "most N of them run at once", metavar="A-B[:STEP],...[%N]", quick=True),
    JobOption("synthetic", ("--synthetic",), (), "choice", "run the papers' synthetic program instead of a command",
              choices=("compute", "io", "mixed", "phased", "timed", "spin")),
    _synthetic("iterations", "int", 250, "synthetic: barriers; 0 = forever"),
    _synthetic("compute_ms", "float", 10.0, "synthetic: CPU ms per iteration"),
    _synthetic("io_writes", "int", 20, "synthetic: writes per iteration"),
    _synthetic("io_bytes", "int", 8193, "synthetic: bytes per write"),
    _synthetic("wait_ms", "float", 0.0, "synthetic: blocking wait per iteration"),
    _synthetic("phases", "int", 12, "phased: compute phases"),
    _synthetic("phase_iterations", "int", 20, "phased: iterations of a compute phase"),
    _synthetic("run_ms", "float", 100.0, "timed: runnable ms per iteration"),
    JobOption("chdir", ("-D", "--chdir"), ("-D", "--chdir"), "path",
              "the tasks' working folder (on the nodes) [the current folder]", quick=True),
    JobOption("reservation", ("--reservation",), ("--reservation",), "text",
              "run only on the reservation's nodes, in its window (gang admin reservation list)", metavar="NAME",
              quick=True),
    JobOption("hold", ("-H", "--hold"), ("-H", "--hold"), "flag", "the jobs wait held until gang release (Slurm's -H)",
              default=False, quick=True),
)
BY_NAME = {option.name: option for option in OPTIONS}


def read_duration(text: str, unit: str | None) -> float:
    """A duration as the one grammar reads it (protocol/durations.py), a bare number in ``unit``; raises
    ValueError with one line."""
    bare = text.strip()
    if unit == "seconds" and bare.replace(".", "", 1).isdigit():
        seconds = float(bare)
        if seconds <= 0:
            raise ValueError(f"{text!r}: a time must be above 0")
        return seconds
    found = parse_duration(text)
    if found is None:
        raise ValueError(f"{text!r}: a job's time limit has an end (not UNLIMITED)")
    return found


def converter(option: JobOption) -> Callable[[str], object] | None:
    """How the quick path reads the text of ``option`` (None: as given); a bad value raises ValueError."""
    if option.kind == "count":
        return _count
    if option.kind == "duration":
        return lambda text: read_duration(text, option.unit)
    if option.kind == "time":
        return read_time
    return None


def read_time(text: str) -> float:
    """A point in time as Slurm spells it, read against this machine's clock: Unix seconds; raises ValueError
    with one line."""
    import time

    from gangsched.protocol.times import parse_time  # here: its regular expressions cost every start else

    return parse_time(text, time.time())


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise ValueError(f"{text!r} is not a whole number, 1 or more")
    return value
