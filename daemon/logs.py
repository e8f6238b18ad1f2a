"""One log format for every daemon: time, daemon name, level, message."""

import logging
import sys


def setup_logging(name: str, level: str = "INFO") -> logging.Logger:
    logging.basicConfig(
        stream=sys.stderr,
        level=level.upper(),
        format=f"%(asctime)s {name} %(levelname)s %(message)s",
    )
    return logging.getLogger(f"gangsched.{name}")
