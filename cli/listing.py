"""The list commands, mirroring Slurm's: `gang queue` (squeue), `gang history` (sacct) and
`gang nodes` (sinfo).

People run these in `watch` loops and scripts, so they start in a fraction of the others'
time: they parse their arguments with argparse instead of click and read the master's
replies as plain maps instead of pydantic models (together about two thirds of a click
command's start-up here; `gang bench cli` prints the latencies). Their output is the
same fixed columns (``table``) and, with --json, the protocol's JobInfo and NodeInfo.
"""

import argparse
import datetime
import json
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, NoReturn

from gangsched.cli import table
from gangsched.cli.master_access import NoMaster, error_code, find_master, json_error
from gangsched.client.connection import MasterConnection, MasterUnreachable, RequestRefused
from gangsched.daemon.curve import CurveError
from gangsched.protocol import times

SUMMARIES = {  # `gang --help` lists these (gangsched.cli.group)
    "queue": "List jobs, like squeue: state, nodes, elapsed time, utilization, barriers/s.",
    "history": "Jobs of today, or since -S, finished or not, like sacct: state, exit code, start, end.",
    "nodes": "List nodes, like sinfo: state, CPU share, jobs, last heard from.",
}
def parse_time(text: str) -> float:
    """A time as sacct takes it, by the one grammar of times (protocol/times.py), against this machine's clock."""
    try:
        return times.parse_time(text, time.time())
    except times.TimeError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


class _Formatter(argparse.HelpFormatter):
    def __init__(self, prog: str) -> None:
        # given a width, argparse does not import shutil (and its compressors) to find it, on
        # the first add_argument: a twentieth of `gang queue`'s start
        try:
            width = int(os.environ.get("COLUMNS") or os.get_terminal_size(sys.stdout.fileno()).columns)
        except (ValueError, OSError):
            width = 80
        super().__init__(prog, width=width - 2)


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        # a usage error as every other gang command says it (click's form), with status 2
        self.print_usage(sys.stderr)
        self.exit(2, f"Error: {message}\n")


def _parser(name: str, epilog: str | None = None) -> _Parser:
    parser = _Parser(prog=f"gang {name}", description=SUMMARIES[name], epilog=epilog, formatter_class=_Formatter)
    parser.add_argument("--master", help="the master's endpoint")
    parser.add_argument("--keys", type=Path, help="CURVE key folder (gang keygen) [$GANG_KEYS]")
    return parser


def _job_parser(name: str, fields: str, since: str) -> _Parser:
    """The options queue and history share: the time window, whose jobs, in which states, which columns, JSON."""
    parser = _parser(name, "TIME: now[-N[s|m|h|d]], YYYY-MM-DD[THH:MM[:SS]] or HH:MM[:SS] today")
    if name == "queue":
        parser.add_argument("-a", "--all", dest="include_finished", action="store_true",
                            help="finished jobs too (the last 200)")
    parser.add_argument("-S", "--starttime", type=parse_time, metavar="TIME", help=since)
    parser.add_argument("-E", "--endtime", type=parse_time, metavar="TIME",
                        help="only jobs submitted before this time")
    parser.add_argument("-o", "--format", dest="fields", default=fields,
                        help=f"the columns, comma-separated, of: {', '.join(table.JOB_FIELDS)} [{fields}]")
    parser.add_argument("-u", "--user", dest="users", help="only these users' jobs (comma-separated)")
    parser.add_argument("-p", "--partition", dest="partitions", help="only these partitions' jobs (comma-separated)")
    if name == "queue":
        parser.add_argument("-s", "--steps", action="store_true",
                            help="the running steps of the jobs listed, as squeue -s's: a line for each (STEPID "
                                 "NAME USER ST TIME TASKS NODELIST; 12.batch, 12.0, ...)")
        parser.add_argument("-r", "--array", dest="one_line_per_job", action="store_true",
                            help="a line for each waiting job of an array (else an array's waiting jobs are one "
                                 "line, as squeue shows them: 12_[5-9999])")
    parser.add_argument(
        "-t",
        "--states",
        help="only jobs in these states (comma-separated: pending,running,completed,... or PD,R,CD,...)",
    )
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help="the jobs as JSON: a list of JobInfo (docs/protocol.md)")
    parser.add_argument("job_ids", nargs="*", type=int, metavar="JOB_ID", help="only these jobs, finished or not")
    return parser


def _midnight() -> float:
    return datetime.datetime.combine(datetime.date.today(), datetime.time()).timestamp()


def _queue(master: MasterConnection, options: argparse.Namespace) -> None:
    _list_jobs(master, options, options.include_finished, options.starttime)


def _history(master: MasterConnection, options: argparse.Namespace) -> None:
    _list_jobs(master, options, True, _midnight() if options.starttime is None else options.starttime)


def _list_jobs(master: MasterConnection, options: argparse.Namespace, include_finished: bool,
               since: float | None) -> None:
    wanted_states = options.wanted_states
    finished = include_finished or bool(options.job_ids) or wanted_states is not None
    users = None if options.users is None else options.users.split(",")
    partitions = None if options.partitions is None else options.partitions.split(",")
    # the master filters what it can (one user, one partition, the states), so a listing at depth sends only
    # what it shows
    jobs = master.job_maps(options.job_ids or None, finished, since, states=wanted_states,
                           user=users[0] if users is not None and len(users) == 1 else None,
                           partition=partitions[0] if partitions is not None and len(partitions) == 1 else None,
                           arrays=not getattr(options, "one_line_per_job", True), brief=not options.as_json)
    missing = set(options.job_ids) - {job["job_id"] for job in jobs}
    jobs = [job for job in jobs if (users is None or job["spec"]["user"] in users)
            and (partitions is None or job["spec"].get("partition") in partitions)
            and (wanted_states is None or job["state"] in wanted_states)
            and (since is None or job["end_time"] is None or job["end_time"] >= since)
            and (options.endtime is None or job["submit_time"] <= options.endtime)]
    if getattr(options, "steps", False) and not options.as_json:
        print(table.render(table.STEP_COLUMNS, table.live_steps(jobs)))
    else:
        _print(jobs, options.shown, options.as_json)
    if missing:
        raise _Failure(f"no such job: {', '.join(map(str, sorted(missing)))}")


def _nodes(master: MasterConnection, options: argparse.Namespace) -> None:
    if options.reasons:
        nodes = [node for node in master.node_maps() if node.get("reason") is not None]
        if options.as_json:
            print(json.dumps(nodes, indent=1))
            return
        from gangsched.protocol.hostlists import collect_hostlist

        print(table.reason_rows(nodes, collect_hostlist))
        return
    if not options.partition_view:
        _print(master.node_maps(), options.shown, options.as_json)
        return
    listing = master.node_list_map()
    if options.as_json:
        print(json.dumps(listing["partitions"], indent=1))
        return
    from gangsched.protocol.hostlists import collect_hostlist

    print(table.partition_rows(listing["partitions"], listing["nodes"], collect_hostlist))


def _states(parser: _Parser, given: str | None) -> set[str] | None:
    if given is None:
        return None
    codes = {code: state for state, code in table.STATE_CODES.items()}
    wanted = set()
    for name in given.split(","):
        state = codes.get(name.strip().upper(), name.strip().lower())
        if state not in table.STATE_CODES:
            parser.error(f"-t/--states: no state {name!r}: one of {', '.join(table.STATE_CODES)}")
        wanted.add(state)
    return wanted


def _columns(parser: _Parser, fields: dict[str, "table.Column[Any]"], spec: str) -> "list[table.Column[Any]]":
    try:
        return table.chosen(fields, spec)
    except ValueError as error:
        parser.error(f"-o/--format: {error}")


def _print(rows: list[dict[str, Any]], shown: "list[table.Column[Any]]", as_json: bool) -> None:
    # the maps are the models' fields as the master packed them: their JSON is the models'
    print(json.dumps(rows, indent=1) if as_json else table.render(shown, rows))


class _Failure(Exception):
    """An error after the output (jobs asked for by id that do not exist)."""


Command = Callable[[MasterConnection, argparse.Namespace], None]


def _command(name: str) -> tuple[_Parser, Command]:
    if name == "queue":
        return _job_parser(name, table.QUEUE_FORMAT,
                           "finished jobs too: every one that ended since this time (as sacct's -S)"), _queue
    if name == "history":
        return _job_parser(name, table.HISTORY_FORMAT,
                           "jobs that ended since this time, or still run or wait [today, 00:00]"), _history
    parser = _parser(name)
    parser.add_argument("-o", "--format", dest="fields", default=table.NODES_FORMAT,
                        help=f"the columns, comma-separated, of: {', '.join(table.NODE_FIELDS)} "
                             f"[{table.NODES_FORMAT}]")
    parser.add_argument("-s", "--partitions", dest="partition_view", action="store_true",
                        help="the partition view, as sinfo's: a line for each partition and state of its nodes "
                             "(PARTITION AVAIL TIMELIMIT NODES STATE NODELIST; the default partition marked *)")
    parser.add_argument("-R", "--list-reasons", dest="reasons", action="store_true",
                        help="the nodes drained, draining or down by an administrator, as sinfo -R's: a line for "
                             "each reason (REASON USER TIMESTAMP NODELIST)")
    parser.add_argument("--json", dest="as_json", action="store_true",
                        help="the nodes as JSON: a list of NodeInfo (docs/protocol.md); with -s, of PartitionInfo")
    return parser, _nodes


def main(name: str, arguments: Sequence[str]) -> None:
    """Run list command ``name``; exit 1 with one line (JSON with --json) on an error, 2 on a usage error."""
    parser, command = _command(name)
    options = parser.parse_args(arguments)
    # the usage errors before the master is asked anything
    options.shown = _columns(parser, table.NODE_FIELDS if name == "nodes" else table.JOB_FIELDS, options.fields)
    options.wanted_states = _states(parser, getattr(options, "states", None))
    try:
        endpoint, keys = find_master(options.master, options.keys)
        with MasterConnection(endpoint, keys=keys) as master:
            command(master, options)
    except (NoMaster, MasterUnreachable, RequestRefused, CurveError, _Failure) as error:
        if options.as_json:
            json_error(str(error), error_code(error))
        print(f"Error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
