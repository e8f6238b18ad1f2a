"""Slurm's ``-o`` formats, as squeue and sinfo read them: ``%[.][width]code`` between plain text, ``%%`` a
``%``; a column as wide as its width (its text cut to it), right-justified after a ``.``, else left."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any

_SPEC = re.compile(r"%(\.)?(\d*)(.)")
# a column: its header, how a row gives its text, its width (None: as wide as the text), right-justified
Column = tuple[str, Callable[..., str], int | None, bool]


class FormatError(ValueError):
    """A code the format's command does not know: the code."""


def parse(text: str, codes: Mapping[str, tuple[str, Callable[..., str]]]) -> list[Column | str]:
    """The columns of a format and the text between them."""
    parts: list[Column | str] = []
    place = 0
    for found in _SPEC.finditer(text):
        parts.append(text[place:found.start()])
        place = found.end()
        right, width, code = found.groups()
        if code == "%" and not right and not width:
            parts.append("%")
            continue
        if code not in codes:
            raise FormatError(code)
        header, field = codes[code]
        parts.append((header, field, int(width) if width else None, bool(right)))
    rest = text[place:]
    if "%" in rest:
        raise FormatError(rest[rest.index("%") + 1:][:1])
    return [*parts, rest]


def codes_of(text: str) -> list[str]:
    """The codes a format names, in order."""
    return [code for right, width, code in _SPEC.findall(text) if code != "%" or right or width]


def cell(text: str, width: int | None, right: bool) -> str:
    if width is None:
        return text
    text = text[:width]
    return text.rjust(width) if right else text.ljust(width)


def line(parts: list[Column | str], value: Callable[[Column], str]) -> str:
    return "".join(part if isinstance(part, str) else cell(value(part), part[2], part[3]) for part in parts)


def header(parts: list[Column | str]) -> str:
    return line(parts, lambda column: column[0])


def row(parts: list[Column | str], *item: Any) -> str:
    return line(parts, lambda column: column[1](*item))
