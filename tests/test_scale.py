"""A thousand node daemons on one master (`gang bench scale`'s emulation: real daemons, tasks
that only record their signals): they register at once, most of them homed at relays, each
gets its tasks and the same small switch, every node's accounts reach the master, and every
task's exit comes back when the jobs are cancelled."""

import pytest

from gangsched.bench.scale import measure_scale, widths

pytestmark = pytest.mark.live


def test_jobs_of_many_widths_fill_mpl_rows():
    assert widths(16) == [8, 4, 2, 1, 1] * 5
    assert all(sum(widths(nodes)) == 5 * nodes for nodes in (16, 100, 1000))


def test_a_thousand_emulated_nodes_register_at_once_and_run_their_jobs():
    # how long registering takes and how much memory the master holds are gang bench scale's figures
    row = measure_scale(1000, quantum_ms=100, seconds=2)
    assert row.switch_bytes <= 256  # the same for 16 nodes: the switch names rows, not nodes
    assert row.relayed > 900  # the master's default fanout, 32: some 60 nodes are homed at it
    # every node reported each switch, but the last few: a node reports every 4 quanta at this size
    assert row.switches > 0 and row.complete >= row.switches - 8
