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
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from gangsched.cli.sizes import SIZE
from gangsched.deploy.config import LOCAL_DEFAULTS, ClusterConfig, ClusterSettingError, settable
from gangsched.protocol.size_setting import is_size

Command = Callable[..., Any]



def settings_options(model: type[BaseSettings]) -> Callable[[Command], Command]:
    prefix = model.model_config.get("env_prefix", "")

    def decorate(command: Command) -> Command:
        for name, field in reversed(model.model_fields.items()):
            default = field.get_default(call_default_factory=True)
            help_text = f"{field.description} [env {prefix}{name.upper()}; default {default}]"
            command = _field_option(name, field, help_text)(command)
        return command

    return decorate


def build(model: type[BaseSettings], given: dict[str, Any]) -> Any:
    """The settings from the options given; the rest from the environment or defaults."""
    return model(**{name: value for name, value in given.items() if value is not None})


def _field_option(name: str, field: FieldInfo, help_text: str) -> Callable[[Command], Command]:
    """``--name`` for a settings field; not given, it is None, and the model decides."""
    kind: Any = SIZE if is_size(field) else _click_type(field.annotation)
    return click.option(f"--{name.replace('_', '-')}", name, type=kind, default=None, help=help_text)


def _click_type(annotation: Any) -> Any:
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
    """The shape of a local cluster and every daemon setting it may be given (``deploy/config.py``),
    shared by `cluster up`, `replay` and the benchmarks; not given, a setting is the daemon's."""
    options: list[Callable[[Command], Command]] = [
        click.option("--nodes", "nodes", type=click.IntRange(min=1), default=4, show_default=True,
                     help="node daemons to start"),
        click.option("--processors-per-node", "processors_per_node", type=click.IntRange(min=1), default=1,
                     show_default=True, help="processors (matrix columns) of each node"),
        click.option("--memory-per-node", "memory_per_node", type=SIZE, default=None, metavar="SIZE",
                     help="memory each node declares, e.g. 512M (K, M, G, T; M if none); a docker node's "
                     "container gets that limit [the host's, less --node-memory-reserve, shared evenly]"),
    ]
    for name, daemon, _, field in settable():
        default = LOCAL_DEFAULTS.get(name, field.get_default(call_default_factory=True))
        options.append(_field_option(name, field, f"{daemon.role}: {field.description} [default {default}]"))
    for option in reversed(options):
        command = option(command)
    return command


def cluster_config(**shape: Any) -> ClusterConfig:
    """The cluster ``cluster_options`` describe; a value a daemon would refuse is a usage error."""
    try:
        return ClusterConfig(**shape)
    except ClusterSettingError as error:
        raise click.UsageError(str(error)) from None


def configuration_doc() -> str:
    """docs/configuration.md: every setting of every daemon, as the models declare them."""
    from gangsched.deploy.config import DAEMONS

    titles = {"master": "`gang master`", "node": "`gang noded`", "io": "`gang ioserver`"}
    parts = [
        "# Configuration\n\n"
        "Every daemon setting is a flag and an environment variable, both made from one pydantic\n"
        "model per daemon (`master/settings.py`, `noded/settings.py`, `jobs/ioserver.py`); a flag\n"
        "wins over the variable, the variable over the default. `gang cluster up`, `gang replay` and\n"
        "the benchmarks take the same settings for the cluster they start: a master setting by its\n"
        "name (`--quantum-ms`), a node's with `--node-` (`--node-kill-grace-s`), the I/O server's\n"
        "with `--io-` (`--io-mode`); those marked *cluster* below are filled in by the cluster.\n"
        "This page is generated from the models (`tests/test_docs.py` checks it is current:\n"
        "`python -c 'from gangsched.cli.options import configuration_doc as d; print(d(), end=\"\")'`).\n"
    ]
    for daemon in DAEMONS:
        prefix = daemon.model.model_config.get("env_prefix", "")
        rows = ["| flag | variable | default | cluster flag | what |", "|---|---|---|---|---|"]
        for name, field in daemon.model.model_fields.items():
            shown = "(the host's)" if field.default_factory else _shown(field.get_default())
            cluster = "*cluster*" if name in daemon.managed else f"`--{(daemon.prefix + name).replace('_', '-')}`"
            text = (field.description or "").replace("|", "\\|")
            rows.append(f"| `--{name.replace('_', '-')}` | `{prefix}{name.upper()}` | {shown} | {cluster} | {text} |")
        parts.append(f"## {titles[daemon.role]}\n\n" + "\n".join(rows) + "\n")
    return "\n".join(parts)


def _shown(default: Any) -> str:
    """A default as the docs show it on every machine."""
    if default == "":
        return "(an ipc socket in the state folder)"
    return f"`{str(default).replace(str(Path.home()), '~')}`"
