"""``scancel``, as scancel(1) ends jobs: by id (``12``, an array's ``12_3`` or ``12_[1-3,7]``, or the array's
job id for all of it), or every job that ``-n``, ``-u``/``--me``, ``-t``, ``-p`` and ``-w`` name together.
As Slurm's, a job already ended or unknown is passed over quietly (said with ``-v``), another user's is
refused (``Access/permission denied``, status 210, Slurm's ESLURM_ACCESS_DENIED as an exit status), and the
others are still cancelled. ``-s/--signal`` sends a running job's tasks a signal instead: every step's but a
batch job's batch step, ``-b`` the batch script's shell alone, ``-f`` every step's processes."""

from __future__ import annotations

import sys

from gangsched.client.connection import RequestRefused, login_name
from gangsched.protocol.array_ranges import array_indices, parse_array
from gangsched.protocol.errors import ErrorCode
from gangsched.protocol.frames import pack
from gangsched.slurm import words
from gangsched.slurm.command import SlurmError, master, nodes_named, options, run, users_named
from gangsched.slurm.getopt import table

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

ACCESS_DENIED = 210  # ESLURM_ACCESS_DENIED (2002), as an exit status keeps it

USAGE = ("[-A account] [--batch] [--full] [--interactive] [-n job_name] [-p partition] "
         "[-Q] [-q qos] [-s signal | --signal=signal] [-t PENDING | RUNNING | SUSPENDED] [--usage] "
         "[-u user_name] [--me] [-V] [-v] [-w hosts...] [job_id[_array_id]]")
FLAGS = table((
    (("-n", "--name", "--jobname"), True, "name"), (("-u", "--user"), True, "user"), (("--me",), False, "me"),
    (("-t", "--state"), True, "states"), (("-p", "--partition"), True, "partition"),
    (("-w", "--nodelist"), True, "nodes"), (("-s", "--signal"), True, "signal"), (("-b", "--batch"), False, "batch"),
    (("-f", "--full"), False, "full"), (("-Q", "--quiet"), False, "quiet"), (("-v", "--verbose"), False, "verbose"),
    (("-i", "--interactive"), False, "interactive"), (("-A", "--account"), True, "account"),
    (("-q", "--qos"), True, "qos"), (("-H", "--hurry"), False, "ignored"), (("-M", "--clusters"), True, "ignored"),
    (("--help",), False, "help"), (("--usage",), False, "help"), (("-V", "--version"), False, "version"),
))
_FILTERS = ("name", "user", "me", "states", "partition", "nodes", "account", "qos")


def asked(text: str) -> tuple[int, set[int] | None]:
    """An operand's job, and the array's indices it names (None: the job, or the whole array)."""
    job, _, rest = text.partition("_")
    if not job.isdigit() or (rest and not (rest.isdigit() or (rest.startswith("[") and rest.endswith("]")))):
        raise SlurmError(f"Invalid job id {text}")
    if not rest:
        return int(job), None
    try:
        ranges, _ = parse_array(rest.strip("[]"))
    except ValueError:
        raise SlurmError(f"Invalid job id {text}") from None
    return int(job), set(array_indices(ranges))


def signal_number(text: str) -> int:
    try:
        return words.signal_number(text)
    except ValueError:
        raise SlurmError(f"Invalid job signal: {text}") from None


def _chosen(job: dict[str, Any], given: dict[str, Any], users: set[str] | None,
            states: set[str] | None, nodes: set[str] | None) -> bool:
    spec = job["spec"]
    labels = spec.get("labels") or {}
    return ((users is None or spec["user"] in users)
            and ("name" not in given or spec["name"] in given["name"].split(","))
            and (states is None or job["state"] in states)
            and ("partition" not in given or spec.get("partition") in given["partition"].split(","))
            and (nodes is None or not nodes.isdisjoint(job.get("node_names") or ()))
            and ("account" not in given or labels.get("account") in given["account"].split(","))
            and ("qos" not in given or labels.get("qos") in given["qos"].split(",")))


def scancel(arguments: list[str]) -> int:
    given, operands = options("scancel", arguments, FLAGS, USAGE)
    if "interactive" in given:
        raise SlurmError("--interactive is not supported by gangsched yet (docs/slurm.md)")
    number = signal_number(given["signal"]) if "signal" in given else None
    named = [asked(operand) for operand in operands]
    if not named and not any(key in given for key in _FILTERS):
        raise SlurmError("No job identification provided")
    try:
        states = words.states_asked(given["states"]) if "states" in given else None
    except words.StateError as error:
        raise SlurmError(f"Invalid job state specified: {error}") from None
    users = users_named(given["user"]) if "user" in given else None
    me = login_name()
    if given.get("me"):
        users = (users or set()) | {me}
    nodes = nodes_named(given["nodes"]) if "nodes" in given else None
    verbose = bool(given.get("verbose"))
    status = 0
    with master() as connection:
        jobs = [job for job in connection.job_maps(brief=True)
                if (not named or words.named(job, named)) and _chosen(job, given, users, states, nodes)]
        for job in jobs:
            if verbose:
                print(f"scancel: {'Terminating' if number is None else f'Signal {number} to'} job "
                      f"{words.job_id(job)}", file=sys.stderr)
            request = {"type": "cancel", "job_id": job["job_id"], "user": me} if number is None else {
                "type": "signal_job", "job_id": job["job_id"], "user": me, "signal": number,
                "batch": bool(given.get("batch")), "full": bool(given.get("full"))}
            try:
                connection.exchange(pack(request))
            except RequestRefused as error:
                if error.code is ErrorCode.PERMISSION_DENIED:
                    print(f"scancel: error: Kill job error on job id {words.job_id(job)}: "
                          f"{words.refusal(error.code, error.reason)}", file=sys.stderr)
                    status = ACCESS_DENIED
                elif verbose or number is not None:  # a signal that reached no task is said, as Slurm says it
                    print(f"scancel: error: Kill job error on job id {words.job_id(job)}: {error}", file=sys.stderr)
                    status = status or int(number is not None)
        if verbose:
            found = {job["job_id"] for job in jobs} | {job["spec"].get("array_job_id") for job in jobs}
            for job_id, _ in named:
                if job_id not in found:
                    print(f"scancel: error: Kill job error on job id {job_id}: Invalid job id specified",
                          file=sys.stderr)
    return status


def main(arguments: list[str] | None = None) -> None:
    run("scancel", scancel, arguments)


if __name__ == "__main__":
    main()
