"""`gang`: run the daemons, bring a local cluster up and down, submit and watch jobs, simulate.

The list commands start first, without click (``listing``): people run them in loops; so does
an ordinary `gang submit` (``quick_submit``), which sweeps run by the thousand.
Every other command is a click command of ``group``.
"""

import os
import signal
import sys
from types import FrameType, ModuleType

LIST_COMMANDS = ("queue", "history", "nodes")


def main() -> None:
    # pydantic looks for plugins among every installed package's entry points when it builds
    # its first model: tens of milliseconds of each command's start, for plugins gangsched has none of
    os.environ.setdefault("PYDANTIC_DISABLE_PLUGINS", "__all__")
    signal.signal(signal.SIGTERM, _unwind)
    try:
        if len(sys.argv) > 1 and sys.argv[1] in LIST_COMMANDS:
            from gangsched.cli import listing

            listing.main(sys.argv[1], sys.argv[2:])
            _leave()
        elif len(sys.argv) > 1 and sys.argv[1] == "submit" and _quick_submit().handles(sys.argv[2:]):
            _quick_submit().main(sys.argv[2:])
            _leave()
        else:
            from gangsched.cli.group import cli

            cli(prog_name="gang")
    except KeyboardInterrupt:
        sys.exit(130)
    except BrokenPipeError:  # the list commands, writing after their reader went away
        from gangsched.cli.pipes import quiet_pipe

        quiet_pipe()


def _leave() -> None:
    """End a list command or a quick submission that did its work, without the interpreter's finalization:
    freeing every module's objects took 5 ms of a command that sweeps and loops run by the thousand, and
    nothing of theirs is left to close (their connection was closed as they returned) but the output."""
    sys.stdout.flush()  # a reader gone: BrokenPipeError, as from any write
    sys.stderr.flush()
    os._exit(0)


def _quick_submit() -> ModuleType:
    from gangsched.cli import quick_submit

    return quick_submit


def _unwind(signum: int, _: FrameType | None) -> None:
    """SIGTERM (kill, a batch system, a CI timeout) unwinds a command as Ctrl-C does, so the clusters,
    containers and processes it started are ended on the way out; the daemons install their own.
    A second SIGTERM (``timeout`` passes its own on, beside the one it got) must not cut that short:
    from now on only SIGKILL ends the command."""
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    raise SystemExit(128 + signum)
