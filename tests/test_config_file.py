"""The configuration file: read and validated whole, every problem placed at its file, line and key,
and the master's settings from flags, environment, file and defaults in that order."""

import warnings
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from gangsched.cli.bench import bench
from gangsched.cli.group import cli
from gangsched.daemon.cluster_file import ClusterFileError, configured_masters
from gangsched.deploy.config import EXAMPLE_CONFIG, settable
from gangsched.master.config_file import ConfigError, master_settings, read_config
from gangsched.master.config_lines import key_lines
from gangsched.policy.partitions import PartitionState, PreemptMode
from gangsched.protocol.durations import DurationError, format_duration, parse_duration


def written(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "gangsched.toml"
    path.write_text(text)
    return path


def problems(path: Path) -> list[str]:
    with pytest.raises(ConfigError) as raised:
        read_config(path)
    return raised.value.lines()


def test_the_example_validates_with_its_nodes_and_partitions():
    checked = read_config(EXAMPLE_CONFIG)
    assert checked.node_names() == ["node1", "node2", "node3", "node4"]
    batch, debug = checked.partitions
    assert (batch.name, batch.default, batch.priority_tier) == ("batch", True, 1)
    assert batch.preempt_mode is PreemptMode.SUSPEND
    assert debug.max_time == 1800.0 and debug.state is PartitionState.UP
    master = checked.master_settings({})
    assert (master.quantum_ms, master.policy, master.mpl) == (100, "gs", 4)
    assert checked.partition_settings(master, debug).quantum_ms == 50
    assert checked.partition_settings(master, batch).policy == "bgs"
    assert checked.partition_settings(master, batch).quantum_ms == 100  # the master's, where it sets none


def test_every_problem_is_one_line_with_its_file_line_and_key(tmp_path):
    path = written(tmp_path, """\
[master]
quantum_ms = 5
colour = "red"

[[nodes]]
names = "node[01-04]"

[[partitions]]
name = "batch"
nodes = "node[01-08]"
default = true

[[partitions]]
name = "debug"
nodes = "node[01-02]"
quantum_ms = 2
speed = 3
default = true

[clusters]
""")
    lines = problems(path)
    assert lines == [
        f"{path}:2: master.quantum_ms: Input should be greater than or equal to 10",
        f"{path}:3: master.colour: no such key",
        f"{path}:10: partitions[0].nodes: no such node in [[nodes]]: node[05-08]",
        f"{path}:15: partitions[1].nodes: partitions 'batch' and 'debug' are both of tier 1 and share "
        "node[01-02]: partitions of one tier may not share nodes",
        f"{path}:16: partitions[1].quantum_ms: Input should be greater than or equal to 10",
        lines[5],
        f"{path}:18: partitions[1].default: only one partition may be the default: partitions[0] is",
        f"{path}:20: clusters: no such section: the file has cluster, master, nodes, partitions",
    ]
    assert lines[5].startswith(f"{path}:17: partitions[1].speed: no such key: a partition's own keys are name,")


@pytest.mark.parametrize(("text", "expected"), [
    ('[[partitions]]\nname = "a"\nmax_time = "1:2:3:4"\n',
     ":3: partitions[0].max_time: '1:2:3:4' is not a time"),
    ('[[partitions]]\nname = "a b"\n', ":2: partitions[0].name: 'a b': a partition's name is"),
    ('[[partitions]]\nname = "a"\npreempt_mode = "pause"\n', ":3: partitions[0].preempt_mode: Input should be"),
    ('[[partitions]]\nname = "a"\nnodes = "n1"\n[[partitions]]\nname = "a"\nnodes = "n2"\n',
     ":5: partitions[1].name: 'a' is also partitions[0]"),
    ('[[nodes]]\nnames = "n[1-"\n', ":2: nodes[0].names: 'n[1-' is not a hostlist"),
    ('[[nodes]]\nnames = "n[1-2]"\n[[nodes]]\nnames = "n2"\n', ":4: nodes[1].names: n2 is listed twice"),
    ('[[nodes]]\nnames = "n1"\nprocessors = "two"\n', ":3: nodes[0].processors: Input should be a valid integer"),
    ('[[partitions]]\nname = "a"\nnodes = "n[1-2]"\n[[partitions]]\nname = "b"\n',
     ":4: partitions[1].nodes: partitions 'a' and 'b' are both of tier 1 and share n[1-2]"),
    ('[master]\nquantum_ms =\n', ":2: not TOML: Invalid value"),
    ('[master]\npolicy = "fast"\n', ":2: master.policy: no policy 'fast'"),
    ('[cluster]\nmasters = ["tcp://m1:7070", "m2:7070"]\n', ":2: cluster.masters[1]: 'm2:7070' is not a master's"),
    ('[cluster]\nmasters = "tcp://m1:7070,tcp://m1:7070"\n', ":2: cluster.masters: a master is listed twice"),
    ('[cluster]\nmaster = "tcp://m1:7070"\n', ":2: cluster.master: no such key: [cluster] has masters"),
])
def test_a_bad_file_is_refused_with_the_line_of_its_problem(tmp_path, text, expected):
    path = written(tmp_path, text)
    (line,) = problems(path)
    assert line.startswith(f"{path}{expected}"), line


def test_nodes_and_commands_read_the_masters_of_the_file_as_the_master_checks_them(tmp_path, monkeypatch):
    path = written(tmp_path, '[cluster]\nmasters = ["tcp://m1:7070", "tcp://m2:7070"]\n[master]\nquantum_ms = 100\n')
    assert read_config(path).master["quantum_ms"] == 100
    assert configured_masters(path) == "tcp://m1:7070,tcp://m2:7070"
    monkeypatch.setenv("GANG_CONFIG", str(path))
    assert configured_masters() == "tcp://m1:7070,tcp://m2:7070"
    monkeypatch.setenv("GANG_CONFIG", str(tmp_path / "missing.toml"))
    with pytest.raises(ClusterFileError, match="missing.toml: cannot read it"):
        configured_masters()
    assert configured_masters(written(tmp_path, "[master]\nmpl = 2\n")) is None  # none listed


def test_partitions_of_different_tiers_may_share_nodes_and_all_spans_every_node(tmp_path):
    path = written(tmp_path, '[[partitions]]\nname = "batch"\n'
                             '[[partitions]]\nname = "debug"\nnodes = "node[1-2]"\npriority_tier = 2\n')
    batch, debug = read_config(path).partitions
    assert batch.node_names([]) == [] and debug.node_names([]) == ["node1", "node2"]
    assert batch.node_names(["a", "b"]) == ["a", "b"]


def test_a_key_inside_a_multi_line_string_is_no_key():
    lines = key_lines('[master]\nlog_level = """\nquantum_ms = 3\n"""\nmpl = 2\n[[partitions]]\nname = "x"\n'
                      '[[partitions]]\n  "name" = "y"  # quoted\n')
    assert lines[("master", "mpl")] == 5 and ("master", "quantum_ms") not in lines
    assert lines[("partitions", 0, "name")] == 7 and lines[("partitions", 1, "name")] == 9
    assert lines[("partitions",)] == 6


def test_flags_win_over_the_environment_which_wins_over_the_file(tmp_path, monkeypatch):
    path = written(tmp_path, "[master]\nquantum_ms = 250\nmpl = 3\nheartbeat_ms = 700\n")
    monkeypatch.setenv("GANG_MASTER_MPL", "5")
    settings = master_settings({"config": path, "heartbeat_ms": 900, "policy": None})
    assert (settings.quantum_ms, settings.mpl, settings.heartbeat_ms, settings.config) == (250, 5, 900, path)
    monkeypatch.setenv("GANG_MASTER_CONFIG", str(path))
    assert master_settings({}).quantum_ms == 250
    monkeypatch.delenv("GANG_MASTER_CONFIG")
    assert master_settings({}).config is None or master_settings({}).config.exists()


def test_gang_admin_config_check_says_valid_or_lists_the_problems(tmp_path):
    runner = CliRunner()
    result = runner.invoke(cli, ["admin", "config", "check", str(EXAMPLE_CONFIG)])
    assert result.exit_code == 0 and "valid: 4 nodes listed; partitions: batch, debug" in result.output
    path = written(tmp_path, "[master]\nmpl = 0\n")
    result = runner.invoke(cli, ["admin", "config", "check", str(path)])
    assert result.exit_code == 1
    assert f"{path}:2: master.mpl: Input should be greater than or equal to 1" in result.output


@pytest.mark.parametrize(("text", "seconds"), [
    ("30", 1800.0), ("30:00", 1800.0), ("1:02:03", 3723.0), ("2-00", 172800.0), ("1-01:30", 91800.0),
    ("1-00:00:05", 86405.0), ("UNLIMITED", None), ("infinite", None),
])
def test_slurm_times_are_read_and_written_as_slurm_does(text, seconds):
    assert parse_duration(text) == seconds
    if seconds is not None:
        assert parse_duration(format_duration(seconds)) == seconds


@pytest.mark.parametrize("text", ["", "0", "1:2:3:4", "a", "-5", "1-", "1:xx"])
def test_a_time_slurm_would_not_read_is_refused(text):
    with pytest.raises(DurationError):
        parse_duration(text)


def test_every_setting_a_cluster_may_be_given_has_a_flag_of_its_own():
    """The master's io_key and the I/O server's key were both --io-key: click warned, and one of them won."""
    flags = [name for name, _, _, _ in settable()]
    assert len(flags) == len(set(flags)), sorted(name for name in flags if flags.count(name) > 1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        bench.get_command(click.Context(bench), "switch").get_params(click.Context(bench))
