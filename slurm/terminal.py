"""srun --pty's side of a step's pseudo-terminal: the user's terminal in raw mode while the step runs, so
that every key (^C, ^Z, ^D and the arrows with them) goes to the task's terminal on its node, whose line
discipline makes of it what a local terminal's would; and the window's size, read for the node at the
start and whenever SIGWINCH says it changed.

Where srun's standard input is not a terminal (a script piping into it) nothing is changed: its bytes go
as they come, and the task's terminal keeps the kernel's default size."""

from __future__ import annotations

import fcntl
import os
import termios
import tty
from types import TracebackType

from gangsched.protocol.stream_frames import WINSIZE_BYTES


class UserTerminal:
    """srun's standard input's terminal, raw within ``with``, given back as it was after (even where srun
    fails)."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._saved: list[int | list[bytes | int]] | None = None

    @property
    def present(self) -> bool:
        return os.isatty(self._fd)

    def __enter__(self) -> UserTerminal:
        if self.present:
            self._saved = termios.tcgetattr(self._fd)
            tty.setraw(self._fd, termios.TCSANOW)
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None,
                 trace: TracebackType | None) -> None:
        if self._saved is not None:
            termios.tcsetattr(self._fd, termios.TCSADRAIN, self._saved)
            self._saved = None

    def size(self) -> bytes | None:
        """The window's size as the kernel's ``struct winsize``; None where there is no terminal."""
        if not self.present:
            return None
        return fcntl.ioctl(self._fd, termios.TIOCGWINSZ, bytes(WINSIZE_BYTES))
