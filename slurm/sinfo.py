"""``sinfo``, as sinfo(1) prints partitions and nodes: a line for each partition and set of nodes alike in
every column asked for (its default: by state), ``-N`` a line for each node, ``-s`` a line for each
partition (``NODES(A/I/O/T)``), ``-R`` the reasons nodes are out of service, ``-o`` with ``%`` codes and
widths, ``-h``, ``-p``, ``-n``, ``-t``. A node is allocated when every processor of its current row is
taken, mixed when some are, as Slurm says of its cores; a gang scheduler's other rows are not counted."""

from __future__ import annotations

from collections.abc import Callable

from gangsched.protocol.durations import format_duration
from gangsched.slurm import columns, words
from gangsched.slurm.columns import Column
from gangsched.slurm.command import SlurmError, master, nodes_named, options, run
from gangsched.slurm.getopt import table
from gangsched.slurm.scontrol import MEGABYTE, node_state

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

    Row = tuple[dict[str, Any], list[dict[str, Any]]]
    Field = Callable[[Row], str]

DEFAULT = "%9P %.5a %.10l %.6D %.6t %N"
NODES = "%10N %.6D %.9P %6t "
SUMMARY = "%9P %.5a %.10l %.16F %N"
REASONS = "%20E %9u %19H %N"
LONG = "%9P %.5a %.10l %.10s %.4r %.8h %.10g %.6D %.11T %N"
NODES_LONG = "%N %.6D %.9P %.11T %.4c %.8z %.6m %.8d %.6w %.8f %20E"

USAGE = ("[-aNRshlv] [-n nodes] [-o format] [-p partition] [-t states]")
FLAGS = table((
    (("-h", "--noheader"), False, "noheader"), (("-o", "--format"), True, "format"),
    (("-N", "--Node"), False, "node"), (("-s", "--summarize"), False, "summarize"),
    (("-R", "--list-reasons"), False, "reasons"), (("-l", "--long"), False, "long"),
    (("-p", "--partition"), True, "partition"), (("-n", "--nodes"), True, "nodes"),
    (("-t", "--states"), True, "states"),
    (("-a", "--all"), False, "ignored"), (("-e", "--exact"), False, "ignored"), (("-M", "--clusters"), True, "ignored"),
    (("-v", "--verbose"), False, "ignored"), (("--help",), False, "help"), (("--usage",), False, "help"),
    (("-V", "--version"), False, "version"),
))
# a row: a partition and the nodes of it alike in every column


def short_state(node: dict[str, Any]) -> str:
    return {"IDLE": "idle", "MIXED": "mix", "ALLOCATED": "alloc", "MIXED+DRAIN": "drng", "IDLE+DRAIN": "drain",
            "DOWN": "down"}[node_state(node)]


def long_state(node: dict[str, Any]) -> str:
    return {"IDLE": "idle", "MIXED": "mixed", "ALLOCATED": "allocated", "MIXED+DRAIN": "draining",
            "IDLE+DRAIN": "drained", "DOWN": "down"}[node_state(node)]


def _limit(partition: dict[str, Any]) -> str:
    limit = partition.get("max_time_s")
    if limit is None:
        return "infinite"
    return format_duration(limit)


def _reason(node: dict[str, Any]) -> str:
    reason = node.get("reason")
    return "none" if not reason else str(reason["text"])


def _counts(nodes: list[dict[str, Any]], of_cpus: bool) -> str:
    """A/I/O/T: allocated, idle, other (out of service) and in all, of processors or of nodes."""
    allocated = idle = other = total = 0
    for node in nodes:
        size = node["processors"] if of_cpus else 1
        total += size
        state = node_state(node)
        if state in ("DOWN", "IDLE+DRAIN", "MIXED+DRAIN"):
            other += size
        elif of_cpus:
            used = min(node.get("processors_used", 0), size)
            allocated, idle = allocated + used, idle + size - used
        elif state == "IDLE":
            idle += 1
        else:
            allocated += 1
    return f"{allocated}/{idle}/{other}/{total}"


def _hostlist(nodes: list[dict[str, Any]]) -> str:
    names = [node["name"] for node in nodes]
    if len(names) < 2:
        return "".join(names)
    from gangsched.protocol.hostlists import collect_hostlist

    return collect_hostlist(names)


def _each(value: Callable[[dict[str, Any]], object]) -> Field:
    return lambda row: str(value(row[1][0]))


# each % code: its header, how a row gives it, and whether it tells nodes apart (else it sums them)
CODES: dict[str, tuple[str, Field, bool]] = {
    "P": ("PARTITION", lambda row: row[0]["name"] + ("*" if row[0]["default"] else ""), False),
    "R": ("PARTITION", lambda row: row[0]["name"], False),
    "a": ("AVAIL", lambda row: "up" if row[0]["state"] == "up" else str(row[0]["state"]), False),
    "l": ("TIMELIMIT", lambda row: _limit(row[0]), False),
    "D": ("NODES", lambda row: str(len(row[1])), False),
    "N": ("NODELIST", lambda row: _hostlist(row[1]), False),
    "F": ("NODES(A/I/O/T)", lambda row: _counts(row[1], False), False),
    "C": ("CPUS(A/I/O/T)", lambda row: _counts(row[1], True), False),
    "t": ("STATE", _each(short_state), True),
    "T": ("STATE", _each(long_state), True),
    "c": ("CPUS", _each(lambda node: node["processors"]), True),
    "m": ("MEMORY", _each(lambda node: node.get("memory", 0) // MEGABYTE), True),
    "E": ("REASON", _each(_reason), True),
    "u": ("USER", _each(lambda node: (node.get("reason") or {}).get("user") or "Unknown"), True),
    "H": ("TIMESTAMP", _each(lambda node: words.clock((node.get("reason") or {}).get("time"))), True),
    "O": ("CPU_LOAD", _each(lambda node: f"{node.get('cpu_share', 0.0):.2f}"), True),
    "e": ("FREE_MEM", _each(lambda node: (node.get("memory", 0) - node.get("memory_committed", 0)) // MEGABYTE),
          True),
    "s": ("JOB_SIZE", lambda row: "1-infinite", False),
    "r": ("ROOT", lambda row: "no", False),
    "h": ("OVERSUBS", lambda row: f"FORCE:{row[0]['mpl']}", False),
    "g": ("GROUPS", lambda row: "all", False),
    "z": ("S:C:T", _each(lambda node: f"{node['processors']}:1:1"), True),
    "d": ("TMP_DISK", lambda row: "0", False),
    "w": ("WEIGHT", lambda row: "1", False),
    "f": ("AVAIL_FEATURES", lambda row: "(null)", False),
}


def parsed(text: str) -> list[Column | str]:
    try:
        return columns.parse(text, {code: (header, field) for code, (header, field, _) in CODES.items()})
    except columns.FormatError as error:
        raise SlurmError(f"Invalid node format specification: {error}") from None


def rows(partitions: list[dict[str, Any]], nodes: dict[str, dict[str, Any]], text: str,
         each_node: bool) -> list[Row]:
    """The partitions' nodes grouped by what the format tells apart, in the partitions' order."""
    telling = [CODES[code][1] for code in columns.codes_of(text) if CODES[code][2]]
    found: list[Row] = []
    for partition in partitions:
        groups: dict[tuple[str, ...], list[dict[str, Any]]] = {}
        for name in partition["nodes"]:
            if name not in nodes:
                continue
            node = nodes[name]
            key = (name,) if each_node else tuple(field((partition, [node])) for field in telling)
            groups.setdefault(key, []).append(node)
        found += [(partition, members) for _, members in sorted(groups.items())]
    return found


def sinfo(arguments: list[str]) -> int:
    given, operands = options("sinfo", arguments, FLAGS, USAGE)
    if operands:
        raise SlurmError(f"sinfo: unrecognized option '{operands[0]}'\nTry \"sinfo --help\" for more information",
                         whole=True)
    text = given.get("format") or (
        REASONS if given.get("reasons") else SUMMARY if given.get("summarize")
        else (NODES_LONG if given.get("long") else NODES) if given.get("node")
        else LONG if given.get("long") else DEFAULT)
    parts = parsed(text)
    with master() as connection:
        listing = connection.node_list_map()
    nodes = {node["name"]: node for node in listing["nodes"]}
    if "nodes" in given:
        named = nodes_named(given["nodes"])
        nodes = {name: node for name, node in nodes.items() if name in named}
    if given.get("reasons"):
        nodes = {name: node for name, node in nodes.items() if node.get("reason") or node["state"] != "up"}
    if "states" in given:
        wanted = {word.lower() for word in given["states"].split(",")}
        nodes = {name: node for name, node in nodes.items()
                 if short_state(node) in wanted or long_state(node) in wanted}
    partitions = [partition for partition in listing["partitions"]
                  if "partition" not in given or partition["name"] in given["partition"].split(",")]
    out: list[str] = []
    if not given.get("noheader"):
        out.append(columns.header(parts))
    found = rows(partitions, nodes, text, bool(given.get("node")))
    if given.get("reasons"):  # a node in several partitions has one reason: one line
        found = list({tuple(node["name"] for node in row[1]): row for row in found}.values())
    out.extend(columns.row(parts, row) for row in found)
    if out:
        print("\n".join(out))
    return 0


def main(arguments: list[str] | None = None) -> None:
    run("sinfo", sinfo, arguments)


if __name__ == "__main__":
    main()
