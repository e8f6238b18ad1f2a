"""What a local or compose cluster is started with: its shape, and settings of its daemons.

Nothing here names a daemon setting: they are read off the daemons' own models
(``MasterSettings``, ``NodeSettings``, ``IoServerSettings``), so a setting
added to a model can be given to a cluster, as ``gang cluster up`` and the
benchmarks' flags, the local cluster's command lines and the compose
cluster's environment, with no edit here. A master setting keeps its name
(``quantum_ms``, ``--quantum-ms``), a node's takes ``node_`` (``node_kill_grace_s``),
the I/O server's ``io_`` (``io_mode``). Settings a cluster fills in itself
(endpoints, folders, keys, node names and CPU shares) are not given.
"""

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings

from gangsched.jobs.ioserver import IoServerSettings
from gangsched.master.config_file import read_config
from gangsched.master.settings import MasterSettings
from gangsched.noded.settings import NodeSettings
from gangsched.protocol.size_setting import is_size
from gangsched.protocol.sizes import format_size


@dataclass(frozen=True)
class Daemon:
    role: str  # "master", "node", "io": the key of its settings in a ClusterConfig
    model: type[BaseSettings]
    prefix: str  # of its settings' names in a ClusterConfig
    managed: frozenset[str]  # filled in by the cluster, never given


DAEMONS = (
    Daemon("master", MasterSettings, "", frozenset({
        "bind", "switch_bind", "report_bind", "keys", "config", "state_dir", "io_addr", "io_key", "checkpoint_dir",
        "log_file"})),
    Daemon("node", NodeSettings, "node_", frozenset({
        "master", "config", "keys", "name", "cpu_share", "processors", "memory", "cpu_list", "spool_dir",
        "run_dir", "peer_transport", "peer_host", "peer_ports", "log_file"})),
    Daemon("io", IoServerSettings, "io_", frozenset({"bind", "path", "key", "log_file"})),
)

EXAMPLE_CONFIG = Path(__file__).with_name("gangsched.toml")  # a complete configuration file, for the local cluster

# where an emulated cluster differs from a daemon's default for a host
LOCAL_DEFAULTS = {"node_kill_grace_s": 2.0, "http_bind": "127.0.0.1:8470"}


class ClusterSettingError(ValueError):
    pass


def settable() -> Iterator[tuple[str, Daemon, str, FieldInfo]]:
    """Every setting a cluster may be given: (its name here, daemon, the daemon's name for it, field)."""
    for daemon in DAEMONS:
        for field_name, field in daemon.model.model_fields.items():
            if field_name not in daemon.managed:
                yield daemon.prefix + field_name, daemon, field_name, field


_SETTABLE = {name: (daemon, field_name) for name, daemon, field_name, _ in settable()}


@dataclass(frozen=True)
class PlannedNode:
    """A node the cluster starts: its name, its processors, the bytes of memory it declares."""

    name: str
    processors: int
    memory: int


@dataclass(frozen=True, init=False)
class ClusterConfig:
    nodes: int
    processors_per_node: int  # matrix columns of each emulated node (a host: its cores)
    keys: bool  # CURVE on loopback TCP instead of private ipc sockets
    memory_per_node: int | None  # bytes each emulated node declares; None: a share of the host's (node_memory)
    settings: dict[str, dict[str, Any]]  # role -> the daemon's settings given
    config_file: str | None  # the configuration file the master reads (docs/configuration.md)
    node_list: list[list[Any]] | None  # the file's nodes: [name, processors, memory or None]; None: node1..nodeN
    masters: int  # masters sharing the store (a PostgreSQL one if more than one), one leading

    def __init__(self, nodes: int = 4, processors_per_node: int = 1, keys: bool = False,
                 memory_per_node: int | None = None, settings: dict[str, dict[str, Any]] | None = None,
                 config_file: str | None = None, node_list: list[list[Any]] | None = None, masters: int = 1,
                 **named: Any) -> None:
        """``named``: daemon settings by their names here (``quantum_ms=100, node_kill_grace_s=1``);
        ``settings``: the same by role, as the cluster's state file holds them; ``config_file``: the
        master's configuration file, whose nodes (``node_list``), if it lists any, are the cluster's."""
        given: dict[str, dict[str, Any]] = {daemon.role: dict((settings or {}).get(daemon.role, {}))
                                            for daemon in DAEMONS}
        for name, value in named.items():
            if name not in _SETTABLE:
                raise ClusterSettingError(f"a cluster has no setting {name!r}")
            if value is not None:
                daemon, field_name = _SETTABLE[name]
                given[daemon.role][field_name] = value
        for name, value in LOCAL_DEFAULTS.items():
            daemon, field_name = _SETTABLE[name]
            given[daemon.role].setdefault(field_name, value)
        for daemon in DAEMONS:
            given[daemon.role] = _validated(daemon, given[daemon.role])
        object.__setattr__(self, "nodes", nodes if node_list is None else len(node_list))
        object.__setattr__(self, "config_file", config_file)
        object.__setattr__(self, "node_list", node_list)
        object.__setattr__(self, "processors_per_node", processors_per_node)
        object.__setattr__(self, "keys", keys)
        object.__setattr__(self, "masters", masters)
        object.__setattr__(self, "memory_per_node", memory_per_node)
        object.__setattr__(self, "settings", given)

    @classmethod
    def from_file(cls, path: Path, **shape: Any) -> "ClusterConfig":
        """A cluster of the configuration file ``path`` (which the master reads): the nodes it lists, if it
        lists any, else ``shape``'s; ``ConfigError`` if it does not validate."""
        listed = read_config(path.resolve()).nodes
        node_list = [[name, group.processors, group.memory] for group in listed for name in group.expanded()]
        return cls(**shape, config_file=str(path.resolve()), node_list=node_list or None)

    def planned_nodes(self, host: int) -> list[PlannedNode]:
        """The nodes to start: the file's, else ``nodes`` named node1, node2, ... (``host``: the host's bytes)."""
        if self.node_list is not None:
            return [PlannedNode(name, processors, memory if memory is not None else self.node_memory(host))
                    for name, processors, memory in self.node_list]
        return [PlannedNode(f"node{index}", self.processors_per_node, self.node_memory(host))
                for index in range(1, self.nodes + 1)]

    def node_memory(self, host: int) -> int:
        """What each node declares: as given, else an even share of ``host`` (the host's bytes) less the
        nodes' reserve for the system and the daemons."""
        if self.memory_per_node is not None:
            return self.memory_per_node
        reserve = self.node_memory_reserve
        return int(max(1, (host - reserve) // self.nodes >> 20) << 20)  # whole MiB

    def __getattr__(self, name: str) -> Any:
        """A daemon setting by its name here: as given, else the daemon's default."""
        if name not in _SETTABLE:
            raise AttributeError(name)
        daemon, field_name = _SETTABLE[name]
        given = self.__dict__["settings"][daemon.role]
        if field_name in given:
            return given[field_name]
        return daemon.model.model_fields[field_name].get_default(call_default_factory=True)

    def replace(self, **named: Any) -> "ClusterConfig":
        own = {name: named.pop(name) for name in ("nodes", "processors_per_node", "keys", "memory_per_node",
                                                  "config_file", "node_list", "masters") if name in named}
        return ClusterConfig(**{"nodes": self.nodes, "processors_per_node": self.processors_per_node,
                                "keys": self.keys, "memory_per_node": self.memory_per_node,
                                "config_file": self.config_file, "node_list": self.node_list,
                                "masters": self.masters, **own},
                             settings=self.settings, **named)

    def arguments(self, role: str) -> list[str]:
        """The given settings of one daemon as its command's flags."""
        fields = _fields(role)
        return [part for name, value in self.settings[role].items()
                for part in (f"--{name.replace('_', '-')}", _flag_value(value, fields[name]))]

    def environment(self, role: str) -> dict[str, str]:
        """The given settings of one daemon as its environment variables."""
        daemon = next(daemon for daemon in DAEMONS if daemon.role == role)
        prefix = daemon.model.model_config.get("env_prefix", "")
        fields = _fields(role)
        return {
            f"{prefix}{name.upper()}": _flag_value(value, fields[name]) for name, value in self.settings[role].items()
        }


def _validated(daemon: Daemon, given: dict[str, Any]) -> dict[str, Any]:
    """The values as the daemon's model takes them (its types, bounds and checks), or one clear error."""
    if not given:
        return {}
    try:
        checked: BaseModel = daemon.model.model_validate(given)
    except ValidationError as error:
        problem = error.errors()[0]
        name = daemon.prefix + str(problem["loc"][0]) if problem["loc"] else daemon.role
        raise ClusterSettingError(f"{name}: {problem['msg']}") from None
    return {name: _plain(getattr(checked, name)) for name in given}


def _plain(value: Any) -> Any:
    """A value JSON and a command line can carry."""
    if isinstance(value, (bool, int, float, str)) or value is None:
        return value
    return str(value)


def _fields(role: str) -> dict[str, FieldInfo]:
    return next(daemon for daemon in DAEMONS if daemon.role == role).model.model_fields


def _flag_value(value: Any, field: FieldInfo) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if is_size(field) and isinstance(value, int):
        return format_size(value)  # text without a unit would be read as MiB
    return str(value)

