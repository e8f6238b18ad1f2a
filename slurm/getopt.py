"""Slurm's commands read their flags with getopt_long: ``-n4`` and ``-n 4``, ``-vv``, ``--ntasks=4`` and
``--ntasks 4``, a long flag by any prefix that names it alone, ``--`` ending the flags. sbatch stops at its
script (what follows is the script's); the others take their operands among the flags, as GNU getopt
permutes them (``scancel 12 --signal=USR1``)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence


class Flag:
    """One flag: the key its value is kept under, whether it takes a value, and its long name."""

    __slots__ = ("key", "valued", "long")

    def __init__(self, key: str, valued: bool, long: str) -> None:
        self.key, self.valued, self.long = key, valued, long


class OptionError(Exception):
    """A flag getopt_long refuses, in its words (``unrecognized option '--x'``)."""


def table(rows: Sequence[tuple[tuple[str, ...], bool, str]]) -> dict[str, Flag]:
    """Flags by each spelling, from rows of (spellings, takes a value, key); the long name is the last."""
    return {spelling: Flag(key, valued, spellings[-1]) for spellings, valued, key in rows for spelling in spellings}


def read(arguments: Sequence[str], flags: dict[str, Flag],
         permute: bool = True) -> tuple[list[tuple[Flag, str, str | bool]], list[str]]:
    """The flags given, in order (each with its spelling and value, True for one without), and the operands;
    ``permute`` False: the operands are everything from the first one on."""
    longs = sorted(name for name in flags if name.startswith("--"))
    given: list[tuple[Flag, str, str | bool]] = []
    operands: list[str] = []
    index = 0
    while index < len(arguments):
        token = arguments[index]
        index += 1
        if token == "--":
            return given, operands + list(arguments[index:])
        if not token.startswith("-") or token == "-":
            if not permute:
                return given, [token, *arguments[index:]]
            operands.append(token)
            continue
        if token.startswith("--"):
            name, equals, value = token.partition("=")
            name = _long(name, flags, longs)
            flag = flags[name]
            if flag.valued and not equals:
                if index >= len(arguments):
                    raise OptionError(f"option '{name}' requires an argument")
                value, index = arguments[index], index + 1
            elif not flag.valued and equals:
                raise OptionError(f"option '{name}' doesn't allow an argument")
            given.append((flag, name, value if flag.valued else True))
            continue
        position = 1
        while position < len(token):
            short = f"-{token[position]}"
            if short not in flags:
                raise OptionError(f"invalid option -- '{token[position]}'")
            flag = flags[short]
            if not flag.valued:
                given.append((flag, short, True))
                position += 1
                continue
            value = token[position + 1:]
            if not value:
                if index >= len(arguments):
                    raise OptionError(f"option requires an argument -- '{token[position]}'")
                value, index = arguments[index], index + 1
            given.append((flag, short, value))
            break
    return given, operands


def _long(name: str, flags: dict[str, Flag], longs: list[str]) -> str:
    """The long flag ``name`` names, whole or by a prefix of it alone (getopt_long's abbreviations)."""
    if name in flags:
        return name
    matches = [flag for flag in longs if flag.startswith(name)]
    if len({flags[flag].key for flag in matches}) == 1:
        return matches[0]
    if matches:
        raise OptionError(f"option '{name}' is ambiguous")
    raise OptionError(f"unrecognized option '{name}'")
