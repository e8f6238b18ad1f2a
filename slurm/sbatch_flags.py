"""sbatch's flags, as sbatch(1) spells them: the one table of job options' Slurm spellings
(cli/job_options.py), and the flags sbatch has beside them, each supported, accepted and kept as a label,
or refused in one line (docs/slurm.md lists them all). Read as getopt_long reads them: ``-n4`` and
``-n 4``, ``--ntasks=4`` and ``--ntasks 4``, a long flag by any prefix that names it alone.

Plain data, without click or pydantic, as the quick path's table is: sbatch starts as quickly as it."""

from __future__ import annotations

from gangsched.cli.job_options import OPTIONS
from gangsched.slurm.getopt import Flag, table

# sbatch's own, beside the job options: (spellings, takes a value, what it is)
SBATCH_ONLY: tuple[tuple[tuple[str, ...], bool, str], ...] = (
    (("--wrap",), True, "wrap"),
    (("--parsable",), False, "parsable"),
    (("--export",), True, "export"),
    (("--open-mode",), True, "open_mode"),
    (("--signal",), True, "signal"),
    (("-W", "--wait"), False, "wait"),
    (("--no-requeue",), False, "no_requeue"),
    (("-h", "--help"), False, "help"),
    (("--usage",), False, "help"),
    (("-V", "--version"), False, "version"),
    (("-v", "--verbose"), False, "ignored"),
    (("-Q", "--quiet"), False, "ignored"),
)
# options that only label a job or ask for mail: kept with it and shown, by their long name
LABELS: tuple[tuple[str, ...], ...] = (
    ("-A", "--account"), ("-q", "--qos"), ("--comment",), ("--wckey",), ("--mail-type",), ("--mail-user",),
    ("-M", "--clusters"), ("-L", "--licenses"), ("--profile",), ("--acctg-freq",), ("--nice",),
    ("-s", "--oversubscribe"), ("--get-user-env",), ("--propagate",), ("--container",),
)
# labels that take no value
BARE_LABELS = {"--oversubscribe", "--get-user-env", "--propagate"}
# what nodes without GPUs cannot give: refused with Slurm's message
GPU_FLAGS = ("--gres", "-G", "--gpus", "--gpus-per-node", "--gpus-per-task", "--gpus-per-socket",
             "--cpus-per-gpu", "--mem-per-gpu", "--gpu-bind", "--gpu-freq")
# sbatch's options gangsched does not do yet: refused in one line, never ignored (docs/slurm.md)
NOT_YET = ("-w", "--nodelist", "-x", "--exclude", "--deadline", "-F", "--nodefile",
           "-C", "--constraint", "--mincpus", "--threads-per-core", "--cores-per-socket", "--sockets-per-node",
           "-B", "--extra-node-info", "--ntasks-per-core", "--ntasks-per-socket", "--distribution", "-m",
           "--array-limit", "--het-job")


def _flags() -> dict[str, Flag]:
    flags: dict[str, Flag] = {}
    for option in OPTIONS:
        for spelling in option.slurm:
            flags[spelling] = Flag(option.name, option.kind != "flag", option.slurm[-1])
    flags |= table(SBATCH_ONLY)
    for spellings in LABELS:
        for spelling in spellings:
            flags[spelling] = Flag(f"label:{spellings[-1][2:]}", spellings[-1] not in BARE_LABELS, spellings[-1])
    for spelling in GPU_FLAGS:
        flags[spelling] = Flag("gpus", True, spelling)
    for spelling in NOT_YET:
        flags[spelling] = Flag("not_yet", True, spelling)
    return flags


FLAGS = _flags()
