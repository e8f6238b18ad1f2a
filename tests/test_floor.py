"""`gang bench floor` measures what it says, as a user runs it (figures are not asserted:
they belong to the machine; docs/limits.md has this one's)."""

import csv
import os

import pytest
from click.testing import CliRunner

from gangsched.bench.spawn_floor import spawn_rate
from gangsched.cli.group import cli

pytestmark = pytest.mark.live


def test_the_floor_prints_and_writes_every_measure(tmp_path):
    result = CliRunner().invoke(cli, [
        "bench", "floor", "--processes", "1,2", "--rounds", "10", "--subscribers", "1,2", "--messages", "20",
        "--quanta-ms", "100", "--seconds", "1", "--baseline-s", "0.5", "--nodes", "2", "--spawn-s", "0.3",
        "--csv", str(tmp_path / "floor.csv")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with open(tmp_path / "floor.csv") as file:
        rows = list(csv.DictReader(file))
    measures = {(row["measure"], row["n"]) for row in rows}
    for count in ("1", "2"):
        assert ("SIGSTOP until all stopped", count) in measures and ("ZeroMQ PUB to last SUB", count) in measures
    assert ("CPU clock step, stopped every ~1 ms", "1") in measures
    rates = {row["measure"]: float(row["per_s"]) for row in rows if row["per_s"]}
    assert rates["spawn and wait of /bin/true"] > 0 and rates["fsync'd SQLite commits"] > 0
    assert rates["empty files made in the temporary folder's file system, of a core's time"] > 0
    lost = [row for row in rows if row["measure"] == "job CPU lost to scheduling"]
    assert [row["quantum_ms"] for row in lost] == ["100"] and float(lost[0]["switch_p50_us"]) > 0
    assert float(lost[0]["daemons_pct"]) > 0  # the local cluster's daemons, found and measured
    assert all(float(row["p50_us"]) > 0 for row in rows if row["p50_us"])


def test_a_bad_count_is_one_clear_line():
    result = CliRunner().invoke(cli, ["bench", "floor", "--processes", "1,x"])
    assert result.exit_code == 2 and "not a comma-separated list of whole numbers" in result.output


def test_the_spawn_floor_is_measured_from_interpreters_of_its_own(monkeypatch):
    """Not from the benchmark's process: a fork copies its parent's page tables and each page written
    after, and forked from a process of the benchmark's size the loops measured a third of the machine."""
    def no_fork() -> int:
        raise AssertionError("a loop forked from the benchmark's own process")

    monkeypatch.setattr(os, "fork", no_fork)
    assert spawn_rate(0.3, in_cgroup=False) > 0
