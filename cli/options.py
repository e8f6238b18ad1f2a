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
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from gangsched.cli.param_types import SIZE
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
        click.option("--config", "config_file", type=click.Path(dir_okay=False, exists=True, path_type=Path),
                     default=None, help="the cluster's configuration file (docs/configuration.md), which the "
                     "master reads; the nodes it lists are the cluster's, instead of --nodes (a container each, "
                     "named as the file names them, with --docker)"),
    ]
    for name, daemon, _, field in settable():
        default = LOCAL_DEFAULTS.get(name, field.get_default(call_default_factory=True))
        options.append(_field_option(name, field, f"{daemon.role}: {field.description} [default {default}]"))
    for option in reversed(options):
        command = option(command)
    return command


def cluster_config(**shape: Any) -> ClusterConfig:
    """The cluster ``cluster_options`` describe; a value a daemon would refuse, or a configuration file
    that does not validate, is a usage error."""
    from gangsched.master.config_file import ConfigError

    path: Path | None = shape.pop("config_file", None)
    try:
        return ClusterConfig(**shape) if path is None else ClusterConfig.from_file(path, **shape)
    except (ClusterSettingError, ConfigError) as error:
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
    parts.append(_file_doc())
    return "\n".join(parts)


def _file_doc() -> str:
    """The configuration file's part of docs/configuration.md: its shape, its keys, a complete example."""
    from gangsched.deploy.config import EXAMPLE_CONFIG
    from gangsched.master.config_file import NodeGroup, PartitionConfig
    from gangsched.master.settings import PARTITION_SETTINGS

    def keys(model: type[BaseModel]) -> str:
        rows = ["| key | default | what |", "|---|---|---|"]
        for name, field in model.model_fields.items():
            shown = "(required)" if field.is_required() else _shown(field.get_default())
            text = (field.description or "").replace("|", "\\|")
            rows.append(f"| `{name}` | {shown} | {text} |")
        return "\n".join(rows)

    example = EXAMPLE_CONFIG.read_text()
    matrix = ", ".join(f"`{name}`" for name in PARTITION_SETTINGS)
    return (
        "## The configuration file\n\n"
        "One TOML file holds the cluster's configuration, for an administrator to keep under version\n"
        "control: `gang master --config FILE` reads it (without `--config`, `/etc/gangsched/gangsched.toml`\n"
        "where it exists; `GANG_MASTER_CONFIG` names it too), `gang cluster up [--docker] --config FILE`\n"
        "starts the local or the compose cluster from it (the nodes it lists, each with what it declares, else\n"
        "`--nodes` of them named `node1`, `node2`, ...; a compose cluster gets a container of that name for\n"
        "each, and the file in the master's), and\n"
        "`gang admin config check FILE` validates it without starting anything: every problem, one line\n"
        "each, with the file, the line and the key (`FILE:LINE: partitions[1].quantum_ms: ...`), exit status\n"
        "1. A master given a file that does not validate does not start.\n\n"
        "`gang admin reconfigure` (root) makes a running master read its file again, Slurm's `scontrol\n"
        "reconfigure`, without losing or restarting a job: a partition added, removed (refused while it\n"
        "has jobs, naming them), or changed (it gets a new matrix: its running jobs are adopted where they\n"
        "run, its waiting jobs queued again in their order; a partition left as it was keeps its matrix).\n"
        "A running job on nodes its partition would no longer hold, or a file that does not validate, is\n"
        "refused with the reason, and the running configuration stays. The flags the master was started\n"
        "with still win over the file; `[master]` settings other than the partitions' matrix settings\n"
        "take effect when the master next starts (the reply lists them). Nodes added to `[[nodes]]` may\n"
        "register at once.\n\n"
        "`[cluster]` holds what every host of the cluster reads, not the master alone: `masters`, the\n"
        "masters' endpoints (Slurm's `SlurmctldHost` lines), a list or one string by commas, the first tried\n"
        "first. A node daemon says hello to them where it is given neither `--master` nor `GANG_NODE_MASTER`\n"
        "(`gang noded --config FILE`, else this file where it exists), and the job commands talk to them\n"
        "where they are given neither `--master` nor `GANG_MASTER` and no local cluster is up (`GANG_CONFIG`\n"
        "names another file). They read it with the standard library alone, so a command stays quick; the\n"
        "master checks it with the rest. Copy the one file to every host.\n\n"
        "`[master]` takes any setting of `gang master` above by its flag's name with underscores\n"
        "(`quantum_ms`); a flag or a variable wins over the file, the file over the default. The settings\n"
        "a cluster fills in itself may be set here for a real host (`state_dir`, `bind`, ...).\n\n"
        "`[[nodes]]` (optional) lists the nodes by Slurm's hostlist syntax (`node[01-64]`), with what\n"
        "each declares; a partition may then name only those. Without it, partitions name the nodes that\n"
        "will register.\n\n" + keys(NodeGroup) + "\n\n"
        "`[[partitions]]` divides the nodes; each partition has its own Ousterhout matrix. Its own keys\n"
        "are below; any of " + matrix + " is a setting of its matrix, over `[master]`'s, checked as\n"
        "the master's flag is (its type, its bounds). Partitions of one `priority_tier` may not share\n"
        "nodes (two matrices would each take a node's processors for their own); partitions of different\n"
        "tiers may. Without `[[partitions]]`, one partition over every node runs the master's settings.\n\n"
        + keys(PartitionConfig) + "\n\n"
        "Hostlists are read by ClusterShell's `NodeSet` (the CEA's library, LGPL, a wheel on PyPI; Slurm's\n"
        "syntax, node groups not resolved), rather than by hand. A complete example, for the local\n"
        "cluster's four nodes (`deploy/gangsched.toml`):\n\n```toml\n" + example + "```\n"
    )


def _shown(default: Any) -> str:
    """A default as the docs show it on every machine."""
    if default == "":
        return "(an ipc socket in the state folder)"
    return f"`{str(default).replace(str(Path.home()), '~')}`"
