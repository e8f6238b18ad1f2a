"""One log format for every daemon (time, daemon name, level, message), log files that
rotate, warnings that a flood cannot multiply, and loops that outlive a failing step."""

import logging
import logging.handlers
import sys
import time
from collections.abc import Callable
from pathlib import Path

LOG_FILE_BYTES = 10 * 1024 * 1024  # a file rotates at this size...
LOG_FILES_KEPT = 3  # ...into NAME.1 .. NAME.3, the oldest dropped


def setup_logging(name: str, level: str = "INFO", file: Path | None = None) -> logging.Logger:
    """Log to ``file`` (rotated) if given, else to stderr."""
    handler: logging.Handler = logging.StreamHandler(sys.stderr) if file is None else \
        CountingRotatingFileHandler(file, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILES_KEPT, encoding="utf-8")
    logging.basicConfig(
        handlers=[handler],
        level=level.upper(),
        format=f"%(asctime)s {name} %(levelname)s %(message)s",
    )
    return logging.getLogger(f"gangsched.{name}")


class CountingRotatingFileHandler(logging.handlers.RotatingFileHandler):
    """A log file that rotates at ``maxBytes``, counting what it writes rather than asking the file.

    The standard handler formats each record twice, and looks at the file
    twice and seeks it for each one: twice the cost of a line here
    (docs/limits.md, "Log lines"), and a daemon writes two lines for each job
    (its start and its end), hundreds a second in a flood of short ones. The
    count starts from the file's size as it is opened; a file another program
    truncates is rotated early, never late.
    """

    def __init__(self, filename: Path, maxBytes: int, backupCount: int, encoding: str) -> None:
        super().__init__(filename, maxBytes=maxBytes, backupCount=backupCount, encoding=encoding)
        self._encoding = encoding
        self._written = filename.stat().st_size  # the file is open: it exists

    def emit(self, record: logging.LogRecord) -> None:
        try:
            text = self.format(record) + self.terminator
            size = len(text) if text.isascii() else len(text.encode(self._encoding))
            if self._written and self._written + size > self.maxBytes:
                self.doRollover()
                self._written = 0
            stream = self.stream
            assert stream is not None  # opened with the handler, and again by each rollover
            stream.write(text)
            stream.flush()
            self._written += size
        except RecursionError:
            raise
        except Exception:
            self.handleError(record)


class ThrottledWarning:
    """A warning about events anyone may cause (a bad frame), at most one line per ``every_s``:
    the first of a burst at once, then one line that counts the rest. ``total`` counts them all."""

    def __init__(self, log: logging.Logger, every_s: float = 1.0,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self._log, self._every_s, self._clock = log, every_s, clock
        self._quiet_until = float("-inf")
        self._held = 0
        self.total = 0

    def __call__(self, text: str, *args: object) -> None:
        self.total += 1
        now = self._clock()
        if now < self._quiet_until:
            self._held += 1
            return
        if self._held:
            text += f" (and {self._held} more like it since the last such line)"
        self._log.warning(text, *args)
        self._held, self._quiet_until = 0, now + self._every_s


def survive(log: logging.Logger, what: str, step: Callable[[], object]) -> None:
    """Run one step of a daemon's loop; an unexpected exception is logged, and the loop goes on."""
    try:
        step()
    except Exception:
        log.exception("%s failed; the daemon goes on", what)
