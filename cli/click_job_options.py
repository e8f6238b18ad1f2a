"""The click options of a job, made from the one table of them (cli/job_options.py)."""

from collections.abc import Callable
from typing import Any

import click

from gangsched.cli.job_options import OPTIONS, JobOption, read_duration, read_time
from gangsched.cli.param_types import SIZE, ReadType

TIME = ReadType("time", read_time, float)  # Unix seconds


def _duration(unit: str | None) -> ReadType:
    """Seconds, from the one grammar of durations, a bare number in ``unit``."""
    return ReadType("time", lambda text: read_duration(text, unit), float)


def _type(option: JobOption) -> Any:
    match option.kind:
        case "count":
            return click.IntRange(min=1)
        case "int":
            return int
        case "float":
            return float
        case "fraction":
            return click.FloatRange(0, 1)
        case "duration":
            return _duration(option.unit)
        case "time":
            return TIME
        case "size":
            return SIZE
        case "path":
            return click.Path(file_okay=False)
        case "choice":
            return click.Choice(option.choices)
    return None


def _click_option(option: JobOption) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    shown = not (option.default is None or option.default is False or option.default == ())
    if option.kind == "flag":
        return click.option(*option.flags, option.name, is_flag=True, help=option.help)
    return click.option(*option.flags, option.name, type=_type(option), default=option.default,
                        multiple=option.kind == "many", metavar=option.metavar, show_default=shown, help=option.help)


def job_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """``command`` with every job option of the table, in its order."""
    for option in reversed(OPTIONS):
        command = _click_option(option)(command)
    return command
