"""Daemon logs: a flood of bad frames makes one line a second, and files rotate."""

import logging
from pathlib import Path

from gangsched.daemon.logs import LOG_FILE_BYTES, LOG_FILES_KEPT, ThrottledWarning, setup_logging


def test_a_flood_of_warnings_is_one_line_a_second_with_a_count():
    records: list[str] = []
    logger = logging.getLogger("gangsched.test-throttle")
    handler = logging.Handler()
    handler.emit = lambda record: records.append(record.getMessage())  # type: ignore[method-assign]
    logger.addHandler(handler)
    now = [0.0]
    warn = ThrottledWarning(logger, every_s=1.0, clock=lambda: now[0])
    for step in range(3000):  # 3000 bad frames over 3 s
        now[0] = step / 1000
        warn("bad frame %d", step)
    assert records == ["bad frame 0", "bad frame 1000 (and 999 more like it since the last such line)",
                       "bad frame 2000 (and 999 more like it since the last such line)"]
    assert warn.total == 3000



def test_a_daemons_log_file_rotates_and_keeps_a_bounded_number(tmp_path: Path):
    file = tmp_path / "master.log"
    root = logging.getLogger()
    kept = root.handlers[:]
    try:
        root.handlers = []
        log = setup_logging("master", "INFO", file)
        line = "x" * 1000
        for _ in range(LOG_FILE_BYTES * (LOG_FILES_KEPT + 2) // 1000):
            log.warning(line)
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers = kept
    files = sorted(path.name for path in tmp_path.iterdir())
    assert files == ["master.log", *(f"master.log.{n}" for n in range(1, LOG_FILES_KEPT + 1))]
    assert all(path.stat().st_size <= LOG_FILE_BYTES for path in tmp_path.iterdir())


def test_a_log_file_counts_what_it_held_before_and_bytes_not_characters(tmp_path: Path):
    file = tmp_path / "noded.log"
    file.write_bytes(b"x" * (LOG_FILE_BYTES - 300))  # a daemon started again finds its file nearly full
    root = logging.getLogger()
    kept = root.handlers[:]
    try:
        root.handlers = []
        log = setup_logging("noded", "INFO", file)
        log.warning("\u00e9" * 200)  # 200 characters, 400 bytes: past the size
    finally:
        for handler in root.handlers:
            handler.close()
        root.handlers = kept
    assert (tmp_path / "noded.log.1").stat().st_size == LOG_FILE_BYTES - 300
    assert "\u00e9" * 200 in file.read_text(encoding="utf-8")
