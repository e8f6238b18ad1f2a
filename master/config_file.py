"""The cluster's configuration file: one TOML file for the master's settings, the nodes and the
partitions (docs/configuration.md).

Its sections are validated by the models that make the flags: ``[master]`` by
``MasterSettings`` itself, each partition's own matrix settings by the same
model over the ``[master]`` section, so a key means the same in the file, on
the command line and in the environment. Every problem is found, not only the
first, and each names the file, the line and the key (``config_lines``).
Nothing here starts or changes anything: the master reads a file that
validated whole, or keeps the configuration it runs.
"""

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from gangsched.daemon.cluster_file import DEFAULT_CONFIG, Location, key_name, masters_of
from gangsched.master.config_lines import key_lines
from gangsched.master.settings import PARTITION_SETTINGS, MasterSettings
from gangsched.policy.partitions import (
    ALL_NODES,
    IMPLICIT_PARTITION,
    Partition,
    PartitionState,
    PreemptMode,
    same_tier_sharing,
)
from gangsched.protocol.durations import DurationError, parse_duration
from gangsched.protocol.hostlists import collect_hostlist, expand_hostlist
from gangsched.protocol.records import UserName
from gangsched.protocol.size_setting import Size

SECTIONS = ("cluster", "master", "nodes", "partitions")
_PARTITION_NAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")

Model = TypeVar("Model", bound=BaseModel)
_EVERY_NODE = "\0every node"  # stands for the nodes no file names, in a check of which partitions share


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class NodeGroup(_Section):
    """``[[nodes]]``: nodes by hostlist, with what each declares."""

    names: str = Field(description="the nodes, by Slurm's hostlist: node[01-64],gpu1")
    processors: int = Field(1, ge=1, le=4096, description="each node's processors: its columns of the matrix")
    memory: Size | None = Field(None, description="the memory each node's jobs may commit, e.g. 64G; none: what "
                                "its daemon finds (docs/memory.md)")

    @field_validator("names")
    @classmethod
    def _hostlist(cls, names: str) -> str:
        expand_hostlist(names)
        return names

    def expanded(self) -> list[str]:
        return expand_hostlist(self.names)


class PartitionConfig(BaseModel):
    """``[[partitions]]``: a partition's own keys; any other key is a setting of its matrix, checked
    against the master's (``PARTITION_SETTINGS``)."""

    model_config = ConfigDict(extra="allow", frozen=True)

    name: str = Field(description="its name: gang submit -p NAME")
    nodes: str = Field(ALL_NODES, description="its nodes, by hostlist; ALL: every node (Slurm's Nodes=ALL)")
    default: bool = Field(False, description="where a job that names no partition goes (none marked: the first)")
    priority_tier: int = Field(1, ge=0, le=65533, description="a job of a higher tier may preempt jobs of a lower "
                               "one on the nodes they share (Slurm's PriorityTier)")
    preempt_mode: PreemptMode = Field(PreemptMode.OFF, description="what its running jobs do when a higher tier "
                                      "needs their nodes: suspend, requeue, cancel or off (they are not preempted)")
    max_time: float | None = Field(None, description="the longest time limit a job may ask for, in Slurm's time "
                                   "format (30:00, 1-00:00:00) or minutes; none: UNLIMITED")
    allow_users: list[UserName] | None = Field(None, description="the users who may submit to it, a list or "
                                               "comma-separated; none or ALL: every user")
    state: PartitionState = Field(PartitionState.UP, description="up (takes and starts jobs), down (takes, starts "
                                  "none), drain (takes none, runs what it has), inactive (takes and starts none)")

    @field_validator("name")
    @classmethod
    def _name(cls, name: str) -> str:
        if not _PARTITION_NAME.fullmatch(name):
            raise ValueError(f"{name!r}: a partition's name is 1 to 64 letters, digits, '_', '-' or '.'")
        return name

    @field_validator("nodes")
    @classmethod
    def _hostlist(cls, nodes: str) -> str:
        if nodes != ALL_NODES:
            expand_hostlist(nodes)
        return nodes

    @field_validator("max_time", mode="before")
    @classmethod
    def _slurm_time(cls, given: object) -> object:
        if isinstance(given, int) and not isinstance(given, bool):
            given = str(given)  # Slurm: a bare number is minutes
        if isinstance(given, str):
            try:
                return parse_duration(given)
            except DurationError as error:
                raise ValueError(str(error)) from None
        return given

    @field_validator("allow_users", mode="before")
    @classmethod
    def _all_users(cls, given: object) -> object:
        if isinstance(given, str):
            return None if given == "ALL" else given.split(",")
        return given

    @property
    def matrix(self) -> dict[str, Any]:
        """The settings of its own matrix the partition gives, over the master's."""
        return dict(self.model_extra or {})

    def node_names(self, listed: list[str]) -> list[str]:
        """Its nodes; ``ALL``: those the file lists (none listed: every node that registers)."""
        return list(listed) if self.nodes == ALL_NODES else expand_hostlist(self.nodes)

    def partition(self, listed: list[str]) -> Partition:
        """The partition as the master runs it (``listed``: the file's nodes)."""
        every = self.nodes == ALL_NODES and not listed
        return Partition(self.name, None if every else frozenset(self.node_names(listed)), self.default,
                         self.priority_tier, self.preempt_mode, self.max_time,
                         None if self.allow_users is None else frozenset(self.allow_users), self.state)


@dataclass(frozen=True)
class ConfigProblem:
    line: int | None
    key: str
    message: str


class ConfigError(Exception):
    """A file that did not validate: every problem, one line each."""

    def __init__(self, path: Path, problems: list[ConfigProblem]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("\n".join(self.lines()))

    def lines(self) -> list[str]:
        """In the file's order."""
        ordered = sorted(self.problems, key=lambda problem: problem.line or 0)
        return [f"{self.path}:{problem.line or '?'}: {problem.key}: {problem.message}" if problem.key else
                f"{self.path}:{problem.line or '?'}: {problem.message}" for problem in ordered]


@dataclass(frozen=True)
class ClusterFile:
    """A configuration file that validated whole."""

    path: Path
    master: dict[str, Any]  # the [master] keys given, as MasterSettings reads them
    nodes: tuple[NodeGroup, ...]
    partitions: tuple[PartitionConfig, ...]

    def node_names(self) -> list[str]:
        return [name for group in self.nodes for name in group.expanded()]

    def master_settings(self, overrides: dict[str, Any]) -> MasterSettings:
        """The master's settings: ``overrides`` (its flags) first, then its environment, then this
        file, then the defaults."""
        prefix = MasterSettings.model_config.get("env_prefix", "")
        in_environment = {name.upper() for name in os.environ}
        from_file = {name: value for name, value in self.master.items()
                     if f"{prefix}{name}".upper() not in in_environment}
        return MasterSettings(**{**from_file, **overrides, "config": self.path})

    def partition_settings(self, master: MasterSettings, partition: PartitionConfig) -> MasterSettings:
        """One partition's matrix settings: its own keys over the master's."""
        return master.model_copy(update=_checked_matrix(master, partition.matrix))


def master_settings(flags: dict[str, Any]) -> MasterSettings:
    """``gang master``'s settings: its flags (None: not given), its environment, its configuration file
    (``--config``, else ``DEFAULT_CONFIG`` where it exists), the defaults, in that order."""
    given = {name: value for name, value in flags.items() if value is not None}
    named = given.pop("config", None) or os.environ.get("GANG_MASTER_CONFIG")
    path = Path(named) if named else Path(DEFAULT_CONFIG) if os.path.exists(DEFAULT_CONFIG) else None
    if path is None:
        return MasterSettings(**given)
    return read_config(path).master_settings(given)


def partition_plan(settings: MasterSettings) -> list[tuple[Partition, MasterSettings]]:
    """The partitions the master runs, each with its matrix's settings: its configuration file's, else
    one over every node with the master's settings."""
    if settings.config is None:
        return [(Partition(IMPLICIT_PARTITION, None, default=True), settings)]
    checked = read_config(settings.config)
    if not checked.partitions:
        return [(Partition(IMPLICIT_PARTITION, None, default=True), settings)]
    listed = checked.node_names()
    return [(partition.partition(listed), checked.partition_settings(settings, partition))
            for partition in checked.partitions]


def read_config(path: Path) -> ClusterFile:
    """The file validated whole; else ``ConfigError`` with every problem found."""
    try:
        text = path.read_text()
    except OSError as error:
        raise ConfigError(path, [ConfigProblem(None, "", f"cannot read it: {error.strerror}")]) from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as error:
        line = getattr(error, "lineno", None) or _line_of(str(error))
        raise ConfigError(path, [ConfigProblem(line, "", f"not TOML: {error}")]) from None
    return _Checker(path, text, data).checked()


class _Checker:
    """Every problem of one file's data, each placed at its line."""

    def __init__(self, path: Path, text: str, data: dict[str, Any]) -> None:
        self._path = path
        self._lines = key_lines(text)
        self._data = data
        self._problems: list[ConfigProblem] = []

    def checked(self) -> ClusterFile:
        for key in self._data:
            if key not in SECTIONS:
                self._problem((key,), f"no such section: the file has {', '.join(SECTIONS)}")
        for location, message in masters_of(self._data.get("cluster", {}))[1]:  # read by nodes and clients
            self._problem(location, message)
        master = self._master()
        nodes = self._each("nodes", NodeGroup)
        partitions = self._each("partitions", PartitionConfig)
        listed = self._listed_nodes(nodes)
        for index, partition in partitions:  # over the defaults where [master] itself did not validate
            self._matrix(index, partition, master or MasterSettings.model_validate({}))
        self._partitions(partitions, listed)
        if self._problems:
            raise ConfigError(self._path, self._problems)
        return ClusterFile(self._path, dict(self._data.get("master", {})), tuple(group for _, group in nodes),
                           tuple(partition for _, partition in partitions))

    def _problem(self, location: Location, message: str) -> None:
        self._problems.append(ConfigProblem(self._line(location), key_name(location), message))

    def _line(self, location: Location) -> int | None:
        """The line of the key, else of the nearest table that holds it."""
        for end in range(len(location), 0, -1):
            if location[:end] in self._lines:
                return self._lines[location[:end]]
        return None

    def _validation(self, at: Location, error: ValidationError) -> None:
        for problem in error.errors():
            message = problem["msg"].removeprefix("Value error, ")
            if problem["type"] == "extra_forbidden":
                message = "no such key"
            self._problem(at + tuple(problem["loc"]), message)

    def _master(self) -> MasterSettings | None:
        section = self._data.get("master", {})
        if not isinstance(section, dict):
            self._problem(("master",), "[master] is a table of settings")
            return None
        try:
            return MasterSettings.model_validate(section)  # without the environment: the file alone
        except ValidationError as error:
            self._validation(("master",), error)
            return None

    def _each(self, section: str, model: type[Model]) -> list[tuple[int, Model]]:
        entries = self._data.get(section, [])
        if not isinstance(entries, list) or not all(isinstance(entry, dict) for entry in entries):
            self._problem((section,), f"[[{section}]] is an array of tables")
            return []
        valid = []
        for index, entry in enumerate(entries):
            try:
                valid.append((index, model.model_validate(entry)))
            except ValidationError as error:
                self._validation((section, index), error)
        return valid

    def _listed_nodes(self, groups: list[tuple[int, NodeGroup]]) -> list[str]:
        listed: dict[str, int] = {}
        for index, group in groups:
            for name in group.expanded():
                if name in listed:
                    self._problem(("nodes", index, "names"), f"{name} is listed twice (also in nodes[{listed[name]}])")
                listed.setdefault(name, index)
        return list(listed)

    def _matrix(self, index: int, partition: PartitionConfig, master: MasterSettings) -> None:
        given = partition.matrix
        for key in [key for key in given if key not in PARTITION_SETTINGS]:
            del given[key]
            self._problem(("partitions", index, key), "no such key: a partition's own keys are "
                          f"{', '.join(PartitionConfig.model_fields)}, and {', '.join(PARTITION_SETTINGS)}")
        try:
            _checked_matrix(master, given)
        except ValidationError as error:
            self._validation(("partitions", index), error)

    def _partitions(self, partitions: list[tuple[int, PartitionConfig]], listed: list[str]) -> None:
        names: dict[str, int] = {}
        for index, partition in partitions:
            if partition.name in names:
                self._problem(("partitions", index, "name"),
                              f"{partition.name!r} is also partitions[{names[partition.name]}]")
            names.setdefault(partition.name, index)
            unknown = [name for name in partition.node_names(listed) if listed and name not in listed]
            if unknown:
                self._problem(("partitions", index, "nodes"),
                              f"no such node in [[nodes]]: {collect_hostlist(unknown)}")
        defaults = [index for index, partition in partitions if partition.default]
        for index in defaults[1:]:
            self._problem(("partitions", index, "default"), f"only one partition may be the default: "
                          f"partitions[{defaults[0]}] is")
        named = frozenset(name for _, partition in partitions if partition.nodes != ALL_NODES
                          for name in partition.node_names(listed))
        # without [[nodes]], a partition over ALL holds every node named elsewhere, and every other
        reach = [(str(index), partition.priority_tier,
                  frozenset(partition.node_names(listed)) if listed or partition.nodes != ALL_NODES
                  else named | {_EVERY_NODE}) for index, partition in partitions]
        by_index = dict(partitions)
        for shared in same_tier_sharing(reach):
            first, second = by_index[int(shared.first)], by_index[int(shared.second)]
            common = "every node" if _EVERY_NODE in shared.nodes else collect_hostlist(list(shared.nodes))
            self._problem(("partitions", int(shared.second), "nodes"),
                          f"partitions {first.name!r} and {second.name!r} are both of tier {second.priority_tier} "
                          f"and share {common}: partitions of one tier may not share nodes")


def _checked_matrix(master: MasterSettings, given: dict[str, Any]) -> dict[str, Any]:
    """A partition's matrix settings validated as the master's own (its types, bounds and checks)."""
    merged = MasterSettings.model_validate({**master.model_dump(exclude_defaults=True), **given})
    return {key: getattr(merged, key) for key in given}


def _line_of(message: str) -> int | None:
    found = re.search(r"at line (\d+)", message)
    return int(found.group(1)) if found else None
