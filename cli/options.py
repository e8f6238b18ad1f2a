"""Click options made from a settings model, so each setting is declared once.

Every field becomes ``--field-name`` with its description, default and
environment variable in ``--help``; an option not given is left to the model,
which then reads the environment or takes its default.
"""

import types
import typing
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import click
from pydantic_settings import BaseSettings

from gangsched.deploy.local import ClusterConfig
from gangsched.policy.catalog import POLICY_NAMES

Command = Callable[..., Any]


def settings_options(model: type[BaseSettings]) -> Callable[[Command], Command]:
    prefix = model.model_config.get("env_prefix", "")

    def decorate(command: Command) -> Command:
        for name, field in reversed(model.model_fields.items()):
            default = field.get_default(call_default_factory=True)
            help_text = f"{field.description} [env {prefix}{name.upper()}; default {default}]"
            option = click.option(
                f"--{name.replace('_', '-')}", name, type=_click_type(field.annotation),
                default=None, help=help_text,
            )
            command = option(command)
        return command

    return decorate


def build(model: type[BaseSettings], given: dict[str, Any]) -> Any:
    """The settings from the options given; the rest from the environment or defaults."""
    return model(**{name: value for name, value in given.items() if value is not None})


def _click_type(annotation: Any) -> click.ParamType | type:
    if isinstance(annotation, types.UnionType) or typing.get_origin(annotation) is typing.Union:
        annotation = next(arg for arg in typing.get_args(annotation) if arg is not type(None))
    if typing.get_origin(annotation) is Literal:
        return click.Choice(typing.get_args(annotation))
    if annotation is Path:
        return click.Path(path_type=Path)
    if annotation is bool:
        return click.BOOL
    return annotation


def cluster_options(command: Callable[..., Any]) -> Callable[..., Any]:
    """The shape of a local cluster, shared by `cluster up` and the benchmarks."""
    defaults = ClusterConfig()
    for flag, name, kind, text in reversed([
        ("--nodes", "nodes", int, "node daemons to start"),
        ("--processors-per-node", "processors_per_node", int, "processors (matrix columns) of each node"),
        ("--coordination", "coordination", click.Choice(["gang", "local"]),
         "gang: stop and continue gangs; local: every task runs, each node's kernel shares its CPUs"),
        ("--quantum-ms", "quantum_ms", int, "time slice"),
        ("--heartbeat-ms", "heartbeat_ms", int, "node heartbeat period"),
        ("--mpl", "mpl", int, "most rows in the matrix"),
        ("--policy", "policy", click.Choice([*POLICY_NAMES, "paired"]), "what starts where; paired: gs, paired"),
        ("--pairing", "pairing", click.Choice(["strict", "paired"]), "which rows run each quantum"),
        ("--matching", "matching", click.Choice(["fair", "best-fit"]), "how paired rows find partners"),
        ("--sharp-change", "sharp_change", float, "utilization jump that makes a job run alone; 0: off"),
        ("--io-mode", "io_mode", click.Choice(["fixed", "fsync"]), "I/O server: fixed service time or fsync"),
        ("--io-service-us", "io_service_us", int, "I/O server service time per write (fixed)"),
    ]):
        default = getattr(defaults, name)
        command = click.option(flag, name, type=kind, default=default, show_default=True, help=text)(command)
    return command
