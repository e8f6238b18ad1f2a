"""``sbatch``, as sbatch(1) runs it: the batch script's text kept at submission (a file that need not be
executable, and may be gone once sbatch returns; stdin; or ``--wrap``), its ``#SBATCH`` lines read as
options (the command line's win), the job made with the submitter's environment (``--export``), and run
by the master as a batch job: the script once, on the allocation's first processor, as its batch step.

Without click or pydantic, as the quick path of `gang submit` (cli/quick_submit.py): a tool submits
thousands. The request is the protocol's ``Submit`` as a plain map, with a token, so that a retry while
the master restarts makes the jobs once. Errors are Slurm's words where it has them, and its statuses."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

from gangsched.cli.job_options import BY_NAME, converter, read_duration, read_time
from gangsched.cli.job_script import directive_lines
from gangsched.cli.master_access import NoMaster, find_master
from gangsched.cli.quick_submit import submitted
from gangsched.client.connection import MasterConnection, MasterUnreachable, RequestRefused, login_name, submitter_umask
from gangsched.daemon.curve import CurveError
from gangsched.protocol.array_ranges import parse_array
from gangsched.protocol.dependency_text import NONE, read_dependency
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.frames import pack
from gangsched.protocol.sizes import parse_size
from gangsched.slurm import getopt
from gangsched.slurm.sbatch_flags import FLAGS

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DIRECTIVE = "#SBATCH"
WRAPPED = "#!/bin/sh\n# This script was created by sbatch --wrap.\n\n{}\n"
NOT_A_SCRIPT = ("This does not look like a batch script.  The first\n"
                "line must start with #! followed by the path to an interpreter.\nFor instance: #!/bin/sh")
FATAL = 255  # sbatch's status for a malformed option (its fatal(): exit(-1))
WAIT_POLL_S = 1.0


class SbatchError(Exception):
    """What sbatch says and the status it exits with."""

    def __init__(self, message: str, status: int = 1, prefix: str = "sbatch: error: ") -> None:
        super().__init__(message)
        self.message, self.status, self.prefix = message, status, prefix


def read_options(arguments: Sequence[str], where: str | None = None) -> tuple[dict[str, Any], list[str]]:
    """The options given and the arguments after them (the script and its own), as getopt_long reads them;
    ``where`` names a script's line for an error in its directives."""
    try:
        given, rest = getopt.read(arguments, FLAGS, permute=False)
    except getopt.OptionError as error:
        raise _usage(str(error), where) from None
    options: dict[str, Any] = {}
    for flag, spelled, value in given:
        _keep(options, flag.key, spelled, value)
    return options, rest


def _keep(options: dict[str, Any], key: str, spelled: str, value: Any) -> None:
    if key.startswith("label:"):
        options.setdefault("labels", {})[key.removeprefix("label:")] = "" if value is True else value
    elif key == "not_yet":
        raise SbatchError(f"{spelled} is not supported by gangsched yet (docs/slurm.md)")
    elif key == "gpus":
        raise SbatchError("Invalid generic resource (gres) specification")
    elif key != "ignored":
        options[key] = value


def _usage(reason: str, where: str | None) -> SbatchError:
    place = f"{where}: " if where else ""
    return SbatchError(f"{place}{reason}\nTry \"sbatch --help\" for more information", FATAL, "sbatch: ")


def script_text(arguments: list[str], options: dict[str, Any]) -> tuple[str, str, list[str]]:
    """The batch script's text, the name it is known by (argv[0]) and its arguments."""
    if "wrap" in options:
        if arguments:
            raise SbatchError("Script arguments not permitted with --wrap option")
        return WRAPPED.format(options["wrap"]), "wrap", []
    if arguments:
        path = arguments[0]
        try:
            with open(path, "rb") as file:
                data = file.read()
        except OSError:
            raise SbatchError(f"Unable to open file {path}") from None
        name, rest = path, arguments[1:]
    else:
        data, name, rest = sys.stdin.buffer.read(), "sbatch", []
    if not data:
        raise SbatchError("Batch script is empty!")
    text = data.decode(errors="replace")
    if not text.startswith("#!"):
        raise SbatchError(NOT_A_SCRIPT.replace("\n", "\nsbatch: error: "))
    if "\0" in text:
        raise SbatchError("The batch script contains a NULL character")
    return text, name, rest


def spec_of(options: dict[str, Any], text: str, name: str, arguments: list[str], environment: dict[str, str],
            user: str, cwd: str, umask: int) -> dict[str, Any]:
    """The job's ``JobSpec`` as a plain map."""
    nodes, per_node = options.get("nodes"), options.get("tasks_per_node")
    array = "array" in options
    after = options.get("dependency", NONE)
    return {
        "name": options.get("name") or os.path.basename(name), "user": user,
        "tasks": options.get("tasks") or (nodes or 1) * (per_node or 1), "nodes": nodes, "tasks_per_node": per_node,
        "cpus_per_task": options.get("cpus_per_task", 1),
        "mem_per_node": options.get("mem_per_node"), "mem_per_cpu": options.get("mem_per_cpu"),
        "argv": [name, *arguments], "cwd": os.path.join(cwd, options["chdir"]) if "chdir" in options else cwd,
        "env": exported(options.get("export", "ALL"), environment), "whole_environment": True,
        "exclusive": options.get("exclusive", False), "estimate_s": options.get("estimate"),
        "requeue": bool(options.get("requeue")) and not options.get("no_requeue"),
        "output": options.get("output") or ("slurm-%A_%a.out" if array else "slurm-%j.out"),
        "error": options.get("error"), "open_mode": options.get("open_mode", "truncate"),
        **after, "partition": options.get("partition"),
        "reservation": options.get("reservation"), "umask": umask, "script": text,
        "submit_host": os.uname().nodename, "submit_dir": cwd, "labels": options.get("labels", {}),
        "signal": options.get("signal"), "begin_time": options.get("begin"),
    }


def exported(text: str, environment: dict[str, str]) -> dict[str, str]:
    """The tasks' environment as ``--export`` gives it: ALL (the submitter's), NONE, or names, ``NAME=value``
    and ALL among them. A variable whose name a shell cannot set (bash's exported functions) is not passed."""
    words = [word for word in text.split(",") if word]
    passed = dict(environment) if "ALL" in words else {}
    for word in words:
        if word in ("ALL", "NONE"):
            continue
        key, equals, value = word.partition("=")
        if equals:
            passed[key] = value
        elif key in environment:
            passed[key] = environment[key]
    return {key: value for key, value in passed.items() if key.isidentifier() and key.isascii()}


def limit_signal(text: str) -> dict[str, Any]:
    """``--signal=[B:]SIG[@SECONDS]`` (60 seconds where none is given) as ``JobSpec.signal``'s map; ``R:``
    (a reservation's end) is refused: gangsched's reservations end no job."""
    from gangsched.slurm.words import signal_number  # only with --signal: sbatch starts without it

    batch, _, rest = text.rpartition(":")
    number, _, seconds = rest.partition("@")
    if batch not in ("", "B") or (seconds and not seconds.isdigit()) or int(seconds or 60) > 65_535:
        raise SbatchError("Invalid --signal specification", FATAL)
    try:
        return {"number": signal_number(number), "seconds": int(seconds or 60), "batch": batch == "B"}
    except ValueError:
        raise SbatchError("Invalid --signal specification", FATAL) from None


def checked(options: dict[str, Any]) -> dict[str, Any]:
    """The options' values read as the one table's rows (and sbatch's own) say; Slurm's message if not."""
    values = dict(options)
    for key in ("tasks", "nodes", "tasks_per_node", "cpus_per_task"):
        if key in values:
            try:
                values[key] = _read(key, values[key])
            except ValueError:
                long = {"tasks": "--ntasks", "nodes": "--nodes", "tasks_per_node": "--ntasks-per-node",
                        "cpus_per_task": "--cpus-per-task"}[key]
                raise SbatchError(f'Invalid numeric value "{values[key]}" for {long}.') from None
    if "estimate" in values:
        try:
            values["estimate"] = read_duration(values["estimate"], None)  # a bare number: minutes
        except ValueError:
            raise SbatchError("Invalid --time specification", FATAL) from None
    for key, flag in (("mem_per_node", "--mem"), ("mem_per_cpu", "--mem-per-cpu")):
        if key in values:
            try:
                values[key] = parse_size(values[key])
            except ValueError:
                raise SbatchError(f"Invalid {flag} specification", FATAL) from None
    if "open_mode" in values:
        mode = values["open_mode"]
        if mode not in ("a", "append", "t", "truncate"):
            raise SbatchError("Invalid --open-mode specification", FATAL)
        values["open_mode"] = "append" if mode.startswith("a") else "truncate"
    if "signal" in values:
        values["signal"] = limit_signal(values["signal"])
    if "begin" in values:
        try:
            values["begin"] = read_time(values["begin"])
        except ValueError:
            raise SbatchError("Invalid --begin specification", FATAL) from None
    if "dependency" in values:
        try:
            values["dependency"] = read_dependency(values["dependency"])
        except ValueError as error:
            raise SbatchError(f"Invalid dependency specification: {error}") from None
    if "array" in values:
        try:
            values["array_ranges"] = parse_array(values["array"])
        except ValueError as error:
            raise SbatchError(f"Invalid job array specification: {error}") from None
    return values


def _read(key: str, text: str) -> Any:
    read = converter(BY_NAME[key])
    return text if read is None else read(text)


def request_of(arguments: Sequence[str], environment: dict[str, str], user: str, cwd: str,
               umask: int) -> tuple[dict[str, Any], dict[str, Any]]:
    """The submission's request and the options, from the command line and the script's directives."""
    given, rest = read_options(arguments)
    if given.get("help") or given.get("version"):
        raise SbatchError(_HELP if given.get("help") else "gangsched (sbatch of docs/slurm.md)", 0, "")
    text, name, script_arguments = script_text(rest, given)
    options: dict[str, Any] = {}
    try:
        lines = directive_lines(text, DIRECTIVE, name)
    except ValueError as error:
        raise SbatchError(str(error)) from None
    for number, words in lines:
        from_line, stray = read_options(words, f"{name}:{number}")
        if stray:
            raise SbatchError(f"{name}:{number}: {' '.join(stray)!r} is not an option")
        _merge(options, from_line)
    _merge(options, given)  # the command line wins
    options = checked(options)
    spec = spec_of(options, text, name, script_arguments, environment, user, cwd, umask)
    array, limit = options.get("array_ranges", (None, None))
    # the token as uuid4().hex makes it, without uuid's import
    request = {"type": "submit", "spec": spec, "token": os.urandom(16).hex(), "array": array, "array_limit": limit,
               "hold": options.get("hold", False)}
    return request, options


def _merge(options: dict[str, Any], later: dict[str, Any]) -> None:
    """``later``'s options over ``options``, its labels added to theirs."""
    labels = {**options.get("labels", {}), **later.get("labels", {})}
    options |= later
    if labels:
        options["labels"] = labels


def main(arguments: Sequence[str] | None = None) -> None:
    arguments = sys.argv[1:] if arguments is None else arguments
    try:
        request, options = request_of(arguments, dict(os.environ), login_name(), os.getcwd(), submitter_umask())
        endpoint, keys = find_master(None, None)
        with MasterConnection(endpoint, keys=keys) as master:
            reply = submitted(master, request)
            job_id = reply["job_id"]
            print(job_id if options.get("parsable") else f"Submitted batch job {job_id}", flush=True)
            if options.get("wait"):
                raise SystemExit(_waited(master, job_id, reply.get("count", 1)))
    except SbatchError as error:
        print(f"{error.prefix}{error.message}".rstrip(), file=sys.stderr if error.status else sys.stdout)
        raise SystemExit(error.status) from None
    except RequestRefused as error:
        print(refusal(error), file=sys.stderr)
        raise SystemExit(1) from None
    except (NoMaster, MasterUnreachable, CurveError) as error:
        print(f"sbatch: error: {error}", file=sys.stderr)
        raise SystemExit(1) from None


def refusal(error: RequestRefused) -> str:
    """The master's refusal as Slurm's sbatch says it: a job no node configuration can hold with Slurm's reason
    for it, after gangsched's own line of what it needs."""
    if error.code is ErrorCode.NEVER_FITS:
        return f"sbatch: error: {error}\nsbatch: error: Batch job submission failed: Requested node configuration " \
            "is not available"
    return f"sbatch: error: Batch job submission failed: {error}"


def _waited(master: MasterConnection, first: int, count: int) -> int:
    """``--wait``: until every job of the submission ended; the worst exit code of theirs (sbatch's)."""
    job_ids = list(range(first, first + count))
    while True:
        reply = master.exchange(pack({"type": "job_query", "job_ids": job_ids, "include_finished": True}))
        jobs = reply["jobs"]
        if len(jobs) == len(job_ids) and all(job["state"] not in ("pending", "running", "suspended") for job in jobs):
            return max(_exit_status(job) for job in jobs)
        time.sleep(WAIT_POLL_S)


def _exit_status(job: dict[str, Any]) -> int:
    code = job.get("exit_code")
    if code is not None and code >= 0:
        return int(code)
    return 0 if job["state"] == "completed" else 1


_HELP = """Usage: sbatch [OPTIONS(0)...] [ : [OPTIONS(N)...]] script(0) [args(0)...]

gangsched's sbatch: Slurm's flags, as docs/slurm.md lists them (supported, accepted and kept, refused)."""


if __name__ == "__main__":
    main()
