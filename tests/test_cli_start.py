"""A command loads only what it uses: `gang --help` no command module, the job commands
neither the cluster code nor plotting, the list commands and an ordinary `gang submit` neither
click nor pydantic nor pyzmq (without keys), nor a parser of files it was given none of (their latency:
`gang bench cli`)."""

import importlib
import os
import subprocess
import sys

import click
import pytest

from gangsched.bench.cli_latency import parallel_runs
from gangsched.cli import listing, quick_submit
from gangsched.cli.group import HELP_LIMIT, LISTING, LazyGroup
from gangsched.cli.main import LIST_COMMANDS


def imported_by(*args: str) -> set[str]:
    """The modules a whole `gang` process imports for ``args``."""
    return imports_of(*args)[0]


def imports_of(*args: str) -> tuple[set[str], set[str]]:
    """The modules a whole `gang` process imports for ``args``, and those of them that gangsched's own
    code loaded, as it was imported or as it ran (not the interpreter's start: an editable install's
    finder loads pathlib)."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "gangsched.cli", *args],
                            capture_output=True, text=True)
    modules: set[str] = set()
    own: set[str] = set()
    pending: list[tuple[int, str]] = []  # importtime prints a module after those it imported, deeper
    for line in result.stderr.splitlines():
        if line.startswith("import time:"):
            field = line.split("|")[-1]
            name, depth = field.strip(), len(field) - len(field.lstrip())
            if own or name.startswith("gangsched"):  # all from the first of gangsched's own on
                own.add(name)
                own.update(child for level, child in pending if level > depth)
            modules.add(name)
            pending = [(level, child) for level, child in pending if level <= depth] + [(depth, name)]
    return modules, own


def test_the_help_lines_are_the_commands_own():
    for name, (target, line) in LazyGroup.lazy.items():
        if name in LIST_COMMANDS:
            own = click.Command(name, help=listing.SUMMARIES[name])
            assert line == own.get_short_help_str(limit=HELP_LIMIT), name
            continue
        module, _, attribute = target.partition(":")
        command = getattr(importlib.import_module(module), attribute)
        assert line == command.get_short_help_str(limit=HELP_LIMIT), name


def test_the_group_lists_as_list_commands_those_main_runs_without_click():
    assert {name for name, (target, _) in LazyGroup.lazy.items() if target == LISTING} == set(LIST_COMMANDS)


@pytest.mark.live
def test_gang_help_imports_no_command():
    modules = imported_by("--help")
    assert "click" in modules
    assert not {name for name in modules if name.startswith(("gangsched.cli.", "pydantic", "zmq", "rich"))} - {
        "gangsched.cli.main", "gangsched.cli.group"}


@pytest.mark.live
def test_a_job_command_loads_no_cluster_code_nor_plots():
    modules = imported_by("cancel", "--master", "ipc:///nonexistent/master.sock", "--help")
    assert "gangsched.client.master_client" in modules  # the job commands loaded
    heavy = {name for name in modules
             if name.startswith(("matplotlib", "gangsched.deploy.local", "gangsched.deploy.config",
                                 "pydantic_settings", "asyncio", "gangsched.sim", "gangsched.policy"))}
    assert not heavy, sorted(heavy)


@pytest.mark.live
def test_a_list_command_loads_neither_click_pydantic_nor_pyzmq():
    modules = imported_by("queue", "--master", "ipc:///nonexistent/master.sock")  # fails: no master there
    assert "gangsched.client.connection" in modules  # it asked, through client/zmtp.py
    assert not {name for name in modules if name.startswith(("click", "pydantic", "rich", "zmq"))}


@pytest.mark.live
def test_an_ordinary_submission_loads_neither_click_pydantic_nor_pyzmq():
    modules, own = imports_of("submit", "--master", "tcp://127.0.0.1:1", "-n", "2", "-a", "0-9%2", "--",
                                  "true")  # fails: no master there
    assert "gangsched.cli.quick_submit" in modules and "gangsched.client.connection" in modules
    # nor the parsers of a configuration file and of a script's directives, which it has none of
    assert not {name for name in modules if name.startswith(("click", "pydantic", "rich", "zmq", "tomllib",
                                                            "shlex"))}
    # nor what it can do without, each a few milliseconds of its start (docs/limits.md, "A submission's
    # imports"): typing and pathlib for annotations and joins, json for --json alone, socket.py's enums
    # over its C module, the IDNA codec for a name that is ASCII
    assert not own & {"typing", "pathlib", "json", "socket", "selectors", "encodings.idna", "dataclasses"}


def test_a_submission_with_other_options_or_a_script_goes_to_the_click_command(tmp_path):
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/sh\n#GANG -n 2\ntrue\n")
    for arguments in (["--exclusive", "--", "true"], [str(script)], ["-n", "2"], ["-n2", "--", "true"]):
        assert not quick_submit.handles(arguments), arguments
    assert quick_submit.parse(["-n", "2", "--json", "-J=sweep", "--", "prog", "-x"]) == \
        ({"tasks": "2", "as_json": True, "name": "sweep"}, ["prog", "-x"])


def test_the_click_group_hands_a_list_command_to_argparse():
    from click.testing import CliRunner

    from gangsched.cli.group import cli

    shown = CliRunner().invoke(cli, ["queue", "--help"])
    assert shown.exit_code == 0 and "List jobs, like squeue" in shown.output and "--states" in shown.output
    refused = CliRunner().invoke(cli, ["nodes", "-o", "colour"])
    assert refused.exit_code == 2


@pytest.mark.live
def test_parallel_loops_count_every_run_and_name_a_failure():
    environment = dict(os.environ)
    row = parallel_runs("python -c pass", [sys.executable, "-c", "pass"], environment, clients=2, each=3)
    assert row["runs"] == 6 and row["runs_per_s"] > 0 and row["command"] == "2 clients x 3 python -c pass"
    failing = [sys.executable, "-c", "import sys; sys.exit('no such thing')"]
    with pytest.raises(RuntimeError, match="a client's python failed: no such thing"):
        parallel_runs("python", failing, environment, clients=2, each=1)
