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
        logging.handlers.RotatingFileHandler(file, maxBytes=LOG_FILE_BYTES, backupCount=LOG_FILES_KEPT)
    logging.basicConfig(
        handlers=[handler],
        level=level.upper(),
        format=f"%(asctime)s {name} %(levelname)s %(message)s",
    )
    return logging.getLogger(f"gangsched.{name}")


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
