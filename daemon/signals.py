"""OS signals delivered as readable events on a daemon's poll loop.

A handler that does work runs between any two bytecodes of the daemon; here a
signal only wakes the loop, which then handles it like any other message.
"""

import signal
import socket
from collections.abc import Iterable
from types import TracebackType


class SignalEvents:
    """While open, the listed signals make ``fileno()`` readable; ``drain()`` names them."""

    def __init__(self, signals: Iterable[signal.Signals]) -> None:
        self._signals = list(signals)
        self._reader, self._writer = socket.socketpair()
        self._reader.setblocking(False)
        self._writer.setblocking(False)
        self._previous_fd = signal.set_wakeup_fd(self._writer.fileno(), warn_on_full_buffer=False)
        self._previous = {sig: signal.signal(sig, _ignore) for sig in self._signals}

    def fileno(self) -> int:
        return self._reader.fileno()

    def drain(self) -> list[signal.Signals]:
        received: list[signal.Signals] = []
        try:
            while data := self._reader.recv(64):
                received += [signal.Signals(number) for number in data]
        except BlockingIOError:
            pass
        return received

    def close(self) -> None:
        for sig, handler in self._previous.items():
            signal.signal(sig, handler)
        signal.set_wakeup_fd(self._previous_fd)
        self._reader.close()
        self._writer.close()

    def __enter__(self) -> "SignalEvents":
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _ignore(signum: int, frame: object) -> None:
    """The wakeup fd does the work; a Python-level handler must exist for it to be written."""
