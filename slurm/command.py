"""What every Slurm command but sbatch shares: its flags read as getopt_long reads them, the master found
as `gang`'s commands find it, and its failures said in Slurm's words with Slurm's statuses
(``squeue: error: Invalid user: x``, ``squeue: unrecognized option '--x'`` and the hint to ``--help``)."""

from __future__ import annotations

import sys
from collections.abc import Callable, Sequence

from gangsched.cli.master_access import NoMaster, find_master
from gangsched.client.connection import MasterConnection, MasterUnreachable, RequestRefused
from gangsched.daemon.curve import CurveError
from gangsched.slurm import getopt

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from typing import Any


class SlurmError(Exception):
    """What the command says (after ``NAME: error: ``, or whole if ``whole``) and its status."""

    def __init__(self, message: str, status: int = 1, whole: bool = False) -> None:
        super().__init__(message)
        self.message, self.status, self.whole = message, status, whole


def options(name: str, arguments: Sequence[str], flags: dict[str, getopt.Flag],
            usage: str, permute: bool = True) -> tuple[dict[str, Any], list[str]]:
    """The flags given, by key (a flag given again: its last value), and the operands (``permute`` False:
    everything from the first one on, a command and its own flags); ``--help`` (keyed ``help``) and
    ``--version`` (``version``) answered here, and the command exits."""
    try:
        given, operands = getopt.read(arguments, flags, permute)
    except getopt.OptionError as error:
        raise SlurmError(f"{name}: {error}\nTry \"{name} --help\" for more information", whole=True) from None
    chosen = {flag.key: value for flag, _, value in given}
    if chosen.get("help") or chosen.get("version"):
        print(f"Usage: {name} {usage}\n\ngangsched's {name}: Slurm's flags, as docs/slurm.md lists them."
              if chosen.get("help") else f"gangsched ({name} of docs/slurm.md)")
        raise SystemExit(0)
    return chosen, operands


def master() -> MasterConnection:
    """A connection to the master, to use in a ``with`` (contextlib's import is a few milliseconds)."""
    endpoint, keys = find_master(None, None)
    return MasterConnection(endpoint, keys=keys)


def run(name: str, body: Callable[[list[str]], int | None], arguments: Sequence[str] | None = None) -> None:
    """Run ``body`` over the command line and exit as Slurm's command would."""
    try:
        status = body(list(sys.argv[1:] if arguments is None else arguments))
    except SlurmError as error:
        print(error.message if error.whole else f"{name}: error: {error.message}", file=sys.stderr)
        raise SystemExit(error.status) from None
    except RequestRefused as error:
        print(f"{name}: error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    except (NoMaster, MasterUnreachable, CurveError) as error:
        print(f"{name}: error: {error}", file=sys.stderr)
        raise SystemExit(1) from None
    except BrokenPipeError:  # `squeue | head`: what was read was all that was wanted
        sys.stderr.close()
        raise SystemExit(0) from None
    raise SystemExit(status or 0)


def users_named(text: str) -> set[str]:
    """The accounts named by name or uid, by commas; Slurm's error for one that is none."""
    import pwd

    users = set()
    for word in text.split(","):
        try:
            users.add(pwd.getpwuid(int(word)).pw_name if word.isdigit() else pwd.getpwnam(word).pw_name)
        except KeyError:
            raise SlurmError(f"Invalid user: {word}") from None
    return users


def nodes_named(text: str) -> set[str]:
    """The nodes of a hostlist."""
    from gangsched.protocol.hostlists import expand_hostlist

    try:
        return set(expand_hostlist(text))
    except ValueError as error:
        raise SlurmError(str(error)) from None
