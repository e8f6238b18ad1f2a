"""The rich console every command that draws with rich prints through."""

from typing import Any

from rich.console import Console

from gangsched.cli.pipes import quiet_pipe


class CommandConsole(Console):
    """rich's console, ending as the other commands do when the reader goes away (`gang matrix | head`):
    quietly, with status 0 (rich's own ends with 1)."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        quiet_pipe()


def command_console(**options: Any) -> Console:
    return CommandConsole(**options)
