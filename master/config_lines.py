"""Where each key of a TOML file is, so that a problem names its line.

The standard library's reader gives values, not places; this reads the file's
lines once more for its table headers (``[master]``, each ``[[partitions]]``,
counted) and its ``key = value`` lines, skipping what lies inside a multi-line
string, and maps each key's place in the data (``("partitions", 1, "nodes")``)
to the line it is set on. A key of an inline table is placed at the line of
the table.
"""

import re

_HEADER = re.compile(r"\s*(\[\[?)\s*([^\]]+?)\s*\]\]?\s*(#.*)?$")
_KEY = re.compile(r"\s*((?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|\"[^\"]*\"|'[^']*'))*)\s*=")


def _parts(dotted: str) -> tuple[str, ...]:
    return tuple(part.strip().strip("\"'") for part in re.findall(r"\"[^\"]*\"|'[^']*'|[^.]+", dotted))


def key_lines(text: str) -> dict[tuple[str | int, ...], int]:
    """Each table's and key's place in the data -> its line (from 1)."""
    lines: dict[tuple[str | int, ...], int] = {}
    counts: dict[tuple[str, ...], int] = {}
    table: tuple[str | int, ...] = ()
    in_string: str | None = None  # the quotes of a multi-line string the line is inside
    for number, line in enumerate(text.splitlines(), start=1):
        if in_string is not None:
            if line.count(in_string) % 2:
                in_string = None
            continue
        header = _HEADER.match(line)
        key = None if header else _KEY.match(line)
        if header:
            name = _parts(header.group(2))
            if header.group(1) == "[[":
                counts[name] = counts.get(name, 0) + 1
                lines.setdefault(name, number)
                table = (*name, counts[name] - 1)
            else:
                table = name
            lines.setdefault(table, number)
        elif key:
            lines.setdefault((*table, *_parts(key.group(1))), number)
        for quotes in ('"""', "'''"):
            if line.count(quotes) % 2:
                in_string = quotes
    return lines
