"""`gang bench floor` measures what it says, as a user runs it (figures are not asserted:
they belong to the machine; docs/limits.md has this one's)."""

import csv

import pytest
from click.testing import CliRunner

from gangsched.cli.group import cli

pytestmark = pytest.mark.live


def test_the_floor_prints_and_writes_every_measure(tmp_path):
    result = CliRunner().invoke(cli, [
        "bench", "floor", "--processes", "1,2", "--rounds", "10", "--subscribers", "1,2", "--messages", "20",
        "--quanta-ms", "100", "--seconds", "1", "--baseline-s", "0.5", "--nodes", "2",
        "--csv", str(tmp_path / "floor.csv")], catch_exceptions=False)
    assert result.exit_code == 0, result.output
    with open(tmp_path / "floor.csv") as file:
        rows = list(csv.DictReader(file))
    measures = {(row["measure"], row["n"]) for row in rows}
    for count in ("1", "2"):
        assert ("SIGSTOP until all stopped", count) in measures and ("ZeroMQ PUB to last SUB", count) in measures
    assert ("CPU clock step, stopped every ~1 ms", "1") in measures
    lost = [row for row in rows if row["measure"] == "job CPU lost to scheduling"]
    assert [row["quantum_ms"] for row in lost] == ["100"] and float(lost[0]["switch_p50_us"]) > 0
    assert float(lost[0]["daemons_pct"]) > 0  # the local cluster's daemons, found and measured
    assert all(float(row["p50_us"]) > 0 for row in rows if row["p50_us"])


def test_a_bad_count_is_one_clear_line():
    result = CliRunner().invoke(cli, ["bench", "floor", "--processes", "1,x"])
    assert result.exit_code == 2 and "not a comma-separated list of whole numbers" in result.output
