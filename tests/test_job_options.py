"""The one table of job options (cli/job_options.py): every option gives the same job whichever way it is
given, the quick path of an ordinary submission, the click command's flags, and a script's #GANG lines."""

from pathlib import Path

import click
import pytest

from gangsched.cli import quick_submit
from gangsched.cli.job_options import BY_NAME, OPTIONS
from gangsched.cli.submit import _with_directives, job_spec, submit
from gangsched.jobs.synthetic import KINDS
from gangsched.protocol.records import JobSpec, MpiKind

USER, CWD, UMASK = "alice", "/work", 0o027
# a value for each option that is not a flag, as a user types it
SAMPLES = {"tasks": "3", "nodes": "2", "tasks_per_node": "2", "cpus_per_task": "2", "mem_per_node": "300M",
           "mem_per_cpu": "100M",
           "mpi": "pmi2", "partition": "debug,batch", "name": "x", "estimate": "1:30:00", "priority": "0.5",
           "output": "o-%j.%t", "error": "e-%j.%t", "exports": "A=1", "dependency": "afterok:3:4", "array": "1-9:2%2",
           "synthetic": "compute", "iterations": "5", "compute_ms": "2.5", "io_writes": "3", "io_bytes": "100",
           "wait_ms": "1.5", "phases": "2", "phase_iterations": "4", "run_ms": "7", "chdir": "/tmp",
           "reservation": "maint", "begin": "2030-01-01T09:30:00"}
SYNTHETIC = {"synthetic", "iterations", "compute_ms", "io_writes", "io_bytes", "wait_ms", "phases",
             "phase_iterations", "run_ms"}
NOT_IN_THE_SPEC = {"array", "hold"}  # they go with the submission, beside its spec


def arguments(name: str) -> list[str]:
    option = BY_NAME[name]
    given = [option.flags[0]] if option.kind == "flag" else [option.flags[0], SAMPLES[name]]
    return given + (["--synthetic", "io"] if name in SYNTHETIC - {"synthetic"} else [])


def by_flags(given: list[str], command: list[str]) -> tuple[JobSpec, dict]:
    context = submit.make_context("submit", [*given, *command])
    return job_spec(context.params, tuple(command), CWD, USER, UMASK), context.params


def by_directives(given: list[str], script: Path) -> tuple[JobSpec, dict]:
    script.write_text("#!/bin/sh\n#GANG " + " ".join(given) + "\ntrue\n")
    context = submit.make_context("submit", [str(script)])
    with context:
        params = _with_directives(context, script, context.params)
    return job_spec(params, (str(script),), CWD, USER, UMASK), params


def by_quick_path(given: list[str], command: list[str]) -> tuple[JobSpec, dict]:
    parsed = quick_submit.parse([*given, "--", *command])
    assert parsed is not None, f"{given}: the quick path does not take it"
    options = quick_submit.converted(parsed[0])
    return JobSpec(**quick_submit.spec_of(options, command, USER, CWD, UMASK)), options


def test_every_option_is_a_row_of_the_table_and_the_command_has_no_other_job_option():
    job_parameters = {parameter.name for parameter in submit.params} - {"command", "wait", "follow", "as_json",
                                                                         "master_endpoint", "keys"}
    assert job_parameters == {option.name for option in OPTIONS}
    assert set(SAMPLES) | {option.name for option in OPTIONS if option.kind == "flag"} == set(BY_NAME)


def test_the_table_s_choices_are_what_the_job_takes():
    assert set(BY_NAME["mpi"].choices) == {kind.value for kind in MpiKind} | {"list"}
    assert BY_NAME["synthetic"].choices == KINDS


@pytest.mark.parametrize("name", [option.name for option in OPTIONS if option.name not in SYNTHETIC])
def test_an_option_by_flag_and_by_directive_gives_the_same_job(name, tmp_path):
    script = tmp_path / "job.sh"
    flagged, flag_values = by_flags(arguments(name), [str(script)])
    directed, directive_values = by_directives(arguments(name), script)
    assert flagged == directed
    assert flag_values[name] == directive_values[name]
    if name not in NOT_IN_THE_SPEC:
        assert flagged != by_flags([], [str(script)])[0], f"{name} changes the job"


@pytest.mark.parametrize("name", sorted(SYNTHETIC))
def test_a_synthetic_job_s_option_by_flag_changes_its_program(name):
    given, _ = by_flags(arguments(name), [])
    default, _ = by_flags(["--synthetic", "io"] if name != "synthetic" else ["--synthetic", "io"], [])
    assert given.argv != default.argv or name == "synthetic" and given.name != default.name


@pytest.mark.parametrize("name", [option.name for option in OPTIONS if option.quick])
def test_an_option_of_an_ordinary_submission_gives_the_same_job_by_the_quick_path(name):
    quick, quick_values = by_quick_path(arguments(name), ["/bin/true"])
    flagged, flag_values = by_flags(arguments(name), ["/bin/true"])
    assert quick == flagged
    assert quick_values.get(name, False) == flag_values[name]


@pytest.mark.parametrize(("given", "seconds"), [("90", 90.0), ("1:30", 90.0), ("1:30:00", 5400.0),
                                                ("1-00", 86400.0), ("2-01:00:30", 176430.0), ("0.5", 0.5)])
def test_a_time_limit_is_read_by_the_one_grammar_a_bare_number_in_seconds(given, seconds):
    assert by_flags(["-t", given], ["/bin/true"])[0].estimate_s == seconds
    assert by_quick_path(["-t", given], ["/bin/true"])[0].estimate_s == seconds


@pytest.mark.parametrize("given", ["0", "-5", "1:xx", "UNLIMITED", "1:2:3:4"])
def test_a_time_limit_slurm_would_not_read_is_refused_in_one_line_by_both_paths(given):
    with pytest.raises(click.BadParameter):
        by_flags(["-t", given], ["/bin/true"])
    with pytest.raises(ValueError, match="^Invalid value for -t/--estimate: "):
        by_quick_path(["-t", given], ["/bin/true"])
