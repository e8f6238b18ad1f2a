"""`gang bench chaos` for a short seeded minute: daemons killed and stopped, the store filled, jobs
that resume themselves and others, and every invariant checked after (bench/chaos.py).

Seed 5 injects each kind of fault in its first five, and seed 22 each of the standby masters' run
in its first seven, the cut included (the faults' order is the seed's; their count depends on the
machine's speed)."""

import os
import subprocess
import sys

import pytest

from gangsched.bench.chaos_checks import Invariants

pytestmark = [pytest.mark.live, pytest.mark.mpi]


def test_a_seeded_minute_of_chaos_keeps_every_invariant():
    run = subprocess.run([sys.executable, "-m", "gangsched.cli", "bench", "chaos", "--minutes", "1", "--seed", "5",
                          "--nodes", "3"], capture_output=True, text=True, timeout=540, env=_wide())
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "every invariant holds" in run.stdout
    for fault in ("node_kill", "node_stop", "master_kill", "master_stop", "store_full"):
        assert f"recoveries: {fault}" in run.stdout, run.stdout


def test_a_seeded_minute_of_chaos_with_a_standby_master_keeps_every_invariant():
    run = subprocess.run([sys.executable, "-m", "gangsched.cli", "bench", "chaos", "--minutes", "1", "--seed", "22",
                          "--nodes", "3", "--masters", "2", "--no-mpi"], capture_output=True, text=True, timeout=540,
                         env=_wide())
    assert run.returncode == 0, run.stdout[-4000:] + run.stderr[-4000:]
    assert "every invariant holds" in run.stdout
    cut = ("master_cut",) if os.geteuid() == 0 else ()  # root's: the first master in a namespace of its own
    for fault in ("master_kill", "master_stop", "takeover", *cut):
        assert f"recoveries: {fault}" in run.stdout, run.stdout
    assert "store_full" not in run.stdout  # the store is PostgreSQL's, not a file system the run fills


def test_a_broken_invariant_is_named_with_examples():
    broken = Invariants(jobs=3, lost=[7], started_twice=["job 2 rank 0 started 2 times"])
    assert broken.violations() == ["lost: 1, e.g. 7", "started twice: 1, e.g. job 2 rank 0 started 2 times"]


def _wide() -> dict[str, str]:
    """The environment, with a terminal wide enough that the table's rows are not wrapped."""
    return {**os.environ, "COLUMNS": "200"}
