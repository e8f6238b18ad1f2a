"""The one grammar of points in time (protocol/times.py), as Slurm spells them, for every command and the
master alike."""

import time

import pytest

from gangsched.protocol.times import TimeError, parse_time


def local(*fields: int) -> float:
    return time.mktime((*fields, *(0,) * (6 - len(fields)), 0, 0, -1))


NOW = local(2026, 12, 2, 15, 20)


@pytest.mark.parametrize(("text", "expected"), [
    ("now", NOW), ("now+90", NOW + 90), ("now-2h", NOW - 7200), ("now+1hours", NOW + 3600),
    ("now-3days", NOW - 3 * 86400), ("now+1w", NOW + 604800), ("now-5m", NOW - 300),
    ("2026-01-02T03:04:05", local(2026, 1, 2, 3, 4, 5)), ("2026-01-02T03:04:05.25", local(2026, 1, 2, 3, 4, 5) + 0.25),
    ("2026-01-02", local(2026, 1, 2)),
    ("9:30", local(2026, 12, 2, 9, 30)), ("23:59:59", local(2026, 12, 2, 23, 59, 59)),
    ("midnight", local(2026, 12, 2)), ("today", local(2026, 12, 2)),
    ("noon", local(2026, 12, 2, 12)),
    ("tomorrow", local(2026, 12, 3)),
    ("3:05PM", local(2026, 12, 2, 15, 5)), ("12:00am", local(2026, 12, 2)), ("fika", local(2026, 12, 2, 15)),
    ("teatime", local(2026, 12, 2, 16)), ("0704", local(2026, 7, 4)), ("070425", local(2025, 7, 4)),
    ("07/04", local(2026, 7, 4)), ("07/04/25-11:40", local(2025, 7, 4, 11, 40)),
    ("07.04.25-11:40:30", local(2025, 7, 4, 11, 40, 30)),
])
def test_a_time_slurm_reads_is_read_the_same(text, expected):
    assert parse_time(text, NOW) == expected


@pytest.mark.parametrize("text", ["later", "now+", "now+5x", "now*2", "25:00", "9:61", "2026-13-01", "now+1m2",
                                  "2026-01-02T03:04:05.x", "2026-01-02.5", "13/01", "07/32", "13:00pm", "07/04.25"])
def test_a_time_slurm_would_not_read_is_refused_in_one_line(text):
    with pytest.raises(TimeError) as refused:
        parse_time(text, NOW)
    assert "\n" not in str(refused.value)
