"""`gang submit` of an ordinary job, without click or pydantic: a sweep's script runs it thousands of
times, so it starts as quickly as `gang queue` (``listing``).

It takes the options such a submission uses (the rows of the one table of job
options marked ``quick``: cli/job_options.py) and a command; given any other option, a script
(whose ``#GANG`` lines are options) or no command, ``handles`` says no and
the click command (``submit``) runs instead, with all of them. The checks are
the same: the numbers here, the array's ranges by the protocol's own parser,
the rest by the master, whose refusal is one line. The request is the
protocol's ``Submit`` as a plain map, with a token, so that a retry while the
master restarts makes the jobs once.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Sequence

from gangsched.cli.job_options import OPTIONS, converter
from gangsched.cli.job_script import is_script
from gangsched.cli.master_access import SUBMIT_RETRY_S, NoMaster, error_code, find_master, json_error
from gangsched.client.connection import (
    MasterConnection,
    MasterUnreachable,
    RequestRefused,
    login_name,
    submitter_umask,
)
from gangsched.daemon.curve import CurveError
from gangsched.protocol.array_ranges import parse_array
from gangsched.protocol.frames import pack

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any, NoReturn

_QUICK = [option for option in OPTIONS if option.quick]  # the one table's rows an ordinary submission uses
_VALUED = {flag: option.name for option in _QUICK if option.kind != "flag" for flag in option.flags} | \
    {"--master": "master"}
_FLAGS = {flag: option.name for option in _QUICK if option.kind == "flag" for flag in option.flags} | \
    {"--json": "as_json"}


def parse(arguments: Sequence[str]) -> tuple[dict[str, Any], list[str]] | None:
    """The options and command of an ordinary submission; None for any other (the click command's)."""
    options: dict[str, Any] = {}
    index = 0
    while index < len(arguments):
        token = arguments[index]
        if token == "--" or not token.startswith("-"):
            command = list(arguments[index + (token == "--"):])
            return (options, command) if command and not is_script(command[0]) else None
        name, equals, value = token.partition("=")
        if name in _FLAGS and not equals:
            options[_FLAGS[name]] = True
            index += 1
        elif name in _VALUED and (equals or index + 1 < len(arguments)):
            options[_VALUED[name]] = value if equals else arguments[index + 1]
            index += 1 if equals else 2
        else:
            return None
    return None


def handles(arguments: Sequence[str]) -> bool:
    return parse(arguments) is not None


def main(arguments: Sequence[str]) -> None:
    parsed = parse(arguments)
    assert parsed is not None, "main runs what handles took"
    options, command = parsed
    try:
        options = converted(options)
    except ValueError as error:
        _usage(str(error))
    try:
        array, limit = parse_array(options["array"]) if "array" in options else (None, None)
    except ValueError as error:
        _usage(f"Invalid value for -a/--array: {error}")
    as_json = options.get("as_json", False)
    try:
        endpoint, keys = find_master(options.get("master"), None)
        if endpoint.startswith("ipc://") and not _found(command[0]):  # the nodes are this machine
            raise _Refused(f"command not found: {command[0]}")
        spec = spec_of(options, command, login_name(), os.getcwd(), submitter_umask())
        # the token as uuid4().hex makes it, without uuid's import (a twentieth of this command's start)
        request = {"type": "submit", "spec": spec, "token": os.urandom(16).hex(), "array": array, "array_limit": limit,
                   "hold": options.get("hold", False)}
        with MasterConnection(endpoint, keys=keys) as master:
            reply = submitted(master, request)
    except (NoMaster, MasterUnreachable, RequestRefused, CurveError, _Refused) as error:
        if as_json:
            json_error(str(error), error_code(error))
        print(f"Error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    first, count = reply["job_id"], reply.get("count", 1)
    if as_json:
        import json  # here: only --json needs it

        print(json.dumps({"job_id": first, "job_ids": list(range(first, first + count))}))
    else:
        print(f"submitted job {first}" + ("" if count == 1 else f" (array: jobs {first}-{first + count - 1})"))


def converted(options: dict[str, Any]) -> dict[str, Any]:
    """The options ``parse`` read, their values read as the table's rows say; a bad one raises ValueError."""
    values = dict(options)
    for option in _QUICK:
        read = converter(option)
        if read is not None and option.name in values:
            try:
                values[option.name] = read(values[option.name])
            except ValueError as error:
                raise ValueError(f"Invalid value for {'/'.join(option.flags)}: {error}") from None
    return values


def spec_of(options: dict[str, Any], command: list[str], user: str, cwd: str, umask: int) -> dict[str, Any]:
    """The job's ``JobSpec`` as a plain map, from the options ``parse`` read (and their values converted)."""
    return {"name": options.get("name") or os.path.basename(command[0]), "user": user,
            "tasks": options.get("tasks", 1), "cpus_per_task": options.get("cpus_per_task", 1), "argv": command,
            "env": {}, "estimate_s": options.get("estimate"),
            "output": options.get("output"), "error": options.get("error"), "partition": options.get("partition"),
            "reservation": options.get("reservation"), "begin_time": options.get("begin"),
            "cwd": os.path.abspath(options["chdir"]) if "chdir" in options else cwd, "umask": umask}


def _found(command: str) -> bool:
    """Whether ``command`` runs here, found as the shell finds it (shutil.which, without its import)."""
    if "/" in command:
        return os.access(command, os.X_OK) and not os.path.isdir(command)
    return any(os.access(path := os.path.join(folder, command), os.X_OK) and not os.path.isdir(path)
               for folder in os.get_exec_path())


class _Refused(Exception):
    """A submission refused before the master is asked."""


def submitted(master: MasterConnection, request: dict[str, Any]) -> dict[str, Any]:
    """The master's answer; asked again with the same token while it does not answer (a restart)."""
    frame = pack(request)
    deadline = time.monotonic() + SUBMIT_RETRY_S
    while True:
        try:
            return master.exchange(frame)
        except MasterUnreachable:
            if time.monotonic() >= deadline:
                raise


def _usage(reason: str) -> NoReturn:
    """A usage error as the click command says it: its usage line, the reason, status 2."""
    print(f"Usage: gang submit [OPTIONS] [COMMAND]...\nTry 'gang submit --help' for help.\n\nError: {reason}",
          file=sys.stderr)
    raise SystemExit(2)
