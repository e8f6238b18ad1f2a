"""The docker-compose cluster: the project's docker-compose.yml run as project ``gangsched``.

The host's `gang` reaches the master on 127.0.0.1 (the published port); the
cluster's shape goes to compose as environment variables, and the daemons'
settings given to it as one environment file per service (`GANG_HOME/env/`),
so the compose file names no setting it passes on. Each node gets an even
share of the host's cores as its CFS quota, with a 10 ms period.
"""

import getpass
import json
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass
from pathlib import Path

from gangsched.client.master_client import MasterClient, MasterUnreachable
from gangsched.daemon.curve import keygen
from gangsched.deploy.config import ClusterConfig
from gangsched.deploy.home import DOCKER_STATE, KEYS, default_home
from gangsched.deploy.image import build_image
from gangsched.deploy.local import ClusterError
from gangsched.noded.cgroups import cgroup2_mount
from gangsched.noded.memory import host_memory
from gangsched.protocol.sizes import format_size

IN_CONTAINER_CONFIG = "/etc/gangsched/gangsched.toml"  # where the master's container sees the configuration file

PROJECT = "gangsched"
CFS_PERIOD_US = 10_000
# containers share the host's few cores: a node's report waits 1 ms, so that the others switch first
RT_BUDGET_US = 850_000  # of the 900 ms a second dockerd gets (deploy/ensure-docker.sh), for master, I/O and nodes
RT_RUNTIME_MOST_US = 200_000
WEB_PORT = 8470  # the master container's, published on the host's --http-bind
MASTER_STATE_DIR = "/var/lib/gangsched"  # the master container's state folder (docker-compose.yml)
DOCKER_DEFAULTS = {"node": {"GANG_NODE_REPORT_DELAY_MS": "1"}}
NODE_CGROUPS = "gangsched-docker"  # the host's cgroup v2 folder the node containers make their task groups in
LIMITS = {"cpu", "cpuset", "memory", "pids", "io"}  # the controllers of a container's limits


@dataclass(frozen=True)
class DockerState:
    master: str
    project_dir: str
    config: ClusterConfig


def project_dir() -> Path:
    """The source checkout holding docker-compose.yml: the working folder or the package's own."""
    candidates = [Path.cwd(), *Path(__file__).resolve().parents]
    for folder in candidates:
        if (folder / "docker-compose.yml").exists() and (folder / "pyproject.toml").exists():
            return folder
    raise ClusterError("no docker-compose.yml here: run from the gangsched source folder")


class DockerCluster:
    def __init__(self, home: Path | None = None, port: int = 7070, project: str = PROJECT) -> None:
        self.home = Path(home or default_home()).resolve()
        self.port = port
        self.project = project
        self._state_file = self.home / DOCKER_STATE
        self.keys = self.home / KEYS  # CURVE keys, mounted into the containers

    def state(self) -> DockerState | None:
        if not self._state_file.exists():
            return None
        raw = json.loads(self._state_file.read_text())
        return DockerState(raw["master"], raw["project_dir"], ClusterConfig(**raw["config"]))

    def up(self, config: ClusterConfig, timeout_s: float = 60.0) -> DockerState:
        folder = project_dir()
        build_image(folder, log=lambda line: None)  # cached: seconds when nothing changed
        state = DockerState(f"tcp://127.0.0.1:{self.port}", str(folder), config)
        self.home.mkdir(mode=0o700, parents=True, exist_ok=True)
        keygen(self.keys, [getpass.getuser()])
        self._state_file.write_text(json.dumps(asdict(state), indent=2))
        if config.config_file is not None:
            self._write_configured(config, folder)
        else:
            self._configured.unlink(missing_ok=True)
        self.compose("up", "-d", "master", "ioserver")  # before the nodes, which find the master by its name
        self.compose("up", "-d", "--scale", f"node={0 if config.config_file else config.nodes}")
        self._wait_for_nodes(state, timeout_s)
        return state

    def web_token(self, timeout_s: float = 10.0) -> str:
        """The web view's token, which the master container made (it binds all its addresses, so
        asks for one), copied to GANG_HOME/web-token for the user to find."""
        deadline = time.monotonic() + timeout_s
        while True:
            try:
                token = self.compose("exec", "-T", "master", "cat", f"{MASTER_STATE_DIR}/web-token").strip()
            except ClusterError:
                token = ""
            if token or time.monotonic() >= deadline:
                break
            time.sleep(0.2)
        if not token:
            raise ClusterError(f"the master made no web token within {timeout_s:g} s: docker-compose -p "
                               f"{self.project} logs master")
        path = self.home / "web-token"
        path.touch(mode=0o600)
        path.write_text(token + "\n")
        return token

    def down(self) -> bool:
        """Stop the nodes first (each ends its tasks on SIGTERM), then everything, volumes included."""
        state = self.state()
        if state is None:
            return False
        services = ["node", *self._node_services()]
        self.compose("stop", "-t", "10", *services)
        self.compose("down", "-v", "-t", "10")
        self._state_file.unlink(missing_ok=True)
        self._configured.unlink(missing_ok=True)
        _remove_empty_groups(self.node_cgroup_folder())
        return True

    def master_store(self) -> Path:
        """The master's job store as the host sees it: the file in its state volume (root may read it)."""
        (master,) = self.containers("master")
        mounts = json.loads(subprocess.run(["docker", "inspect", "-f", "{{json .Mounts}}", master], check=True,
                                           capture_output=True, text=True).stdout)
        source = next(mount["Source"] for mount in mounts if mount["Destination"] == MASTER_STATE_DIR)
        return Path(source) / "jobs.db"

    def containers(self, service: str) -> list[str]:
        """The ids of a service's containers, by their number."""
        output = self.compose("ps", "-q", service)
        return [line for line in output.split() if line]

    def compose(self, *arguments: str) -> str:
        state = self.state()
        config = state.config if state else ClusterConfig()
        folder = Path(state.project_dir) if state else project_dir()
        compose = shutil.which("docker-compose")
        if compose is None:
            raise ClusterError("docker-compose is not installed: apt-get install -y docker-compose")
        self._write_settings(config)
        files = ["-f", str(folder / "docker-compose.yml")]
        if self._configured.exists():
            files += ["-f", str(self._configured)]
        result = subprocess.run([compose, "-p", self.project, *files, *arguments],
                                capture_output=True, text=True, env={**os.environ, **self._variables(config)})
        if result.returncode != 0:
            raise ClusterError(f"docker-compose {arguments[0]} failed: {result.stderr.strip()[-1500:]}")
        return result.stdout

    def _variables(self, config: ClusterConfig) -> dict[str, str]:
        share = (os.cpu_count() or 1) / config.nodes
        memory = config.node_memory(host_memory())
        return {
            "GANG_KEYS": str(self.keys),
            "GANG_PORT": str(self.port),
            "GANG_ENV_DIR": str(self._settings_dir),
            "GANG_PROCESSORS_PER_NODE": str(config.processors_per_node),
            "GANG_NODE_MEMORY": format_size(memory),
            "GANG_NODE_MEM_LIMIT": f"{(memory + config.node_memory_reserve) >> 20}m",
            "GANG_NODE_CPU_SHARE": f"{share:.4f}",
            "GANG_NODE_CPU_QUOTA": f"{max(1000, int(CFS_PERIOD_US * share))}us",
            "GANG_NODE_CGROUP_DIR": str(self.node_cgroup_folder()),
            # each container's share of the real-time budget dockerd hands out (ensure-docker.sh): a daemon
            # past its budget is throttled for the rest of the second, and a node then misses its heartbeats
            # (50 ms a second ran out in a migration on a slow machine)
            "GANG_RT_RUNTIME": f"{min(RT_RUNTIME_MOST_US, RT_BUDGET_US // (config.nodes + 2))}us",
            # the web view on the host's --http-bind; off, a port of docker's choosing that nothing serves
            "GANG_WEB_PUBLISH": f"{config.http_bind or '127.0.0.1:'}:{WEB_PORT}",
        }

    def node_cgroup_folder(self) -> Path:
        """The host's folder each node container gets as the parent of its task groups (``--cgroup-parent``),
        its own cgroups being read only: a folder of the host's cgroup v2 hierarchy where that hierarchy
        carries none of the controllers a container's limits are set with (a hybrid host, whose CPU and
        memory limits are cgroup v1's, so a task moved there keeps its container's), where the tasks are
        frozen while descheduled; elsewhere a
        plain folder of the cluster's, in which the nodes can make no group and hold their tasks by
        process tree (docs/architecture.md)."""
        hierarchy = cgroup2_mount()
        if hierarchy is not None and not set((hierarchy / "cgroup.controllers").read_text().split()) & LIMITS:
            folder = hierarchy / NODE_CGROUPS
            try:
                folder.mkdir(exist_ok=True)
                return folder
            except OSError:
                pass
        folder = self.home / "no-cgroups"
        folder.mkdir(parents=True, exist_ok=True)
        return folder

    @property
    def _configured(self) -> Path:
        """The compose file a cluster started from a configuration file adds: a service for each of its
        nodes, named as the file (or the local cluster) names them, and the file in the master's container."""
        return self._settings_dir / "configured.json"  # JSON is YAML: compose reads it

    def _write_configured(self, config: ClusterConfig, folder: Path) -> None:
        assert config.config_file is not None
        memory_of_host = host_memory()
        services: dict[str, object] = {"master": {
            "volumes": [f"{config.config_file}:{IN_CONTAINER_CONFIG}:ro"],
            "environment": {"GANG_MASTER_CONFIG": IN_CONTAINER_CONFIG},
        }}
        for node in config.planned_nodes(memory_of_host):
            limit = f"{(node.memory + config.node_memory_reserve) >> 20}m"
            services[node.name] = {
                "extends": {"file": str(folder / "docker-compose.yml"), "service": "node"},
                "hostname": node.name,
                "mem_limit": limit, "memswap_limit": limit,
                "environment": {"GANG_NODE_NAME": node.name, "GANG_NODE_PROCESSORS": str(node.processors),
                                "GANG_NODE_MEMORY": format_size(node.memory)},
            }
        self._settings_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._configured.write_text(json.dumps({"version": "2.4", "services": services}, indent=1))

    def _node_services(self) -> list[str]:
        if not self._configured.exists():
            return []
        services = json.loads(self._configured.read_text())["services"]
        return [name for name in services if name != "master"]

    @property
    def _settings_dir(self) -> Path:
        return self.home / "env"

    def _write_settings(self, config: ClusterConfig) -> None:
        self._settings_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        for role, service in (("master", "master"), ("node", "node"), ("io", "ioserver")):
            given = {**DOCKER_DEFAULTS.get(role, {}), **config.environment(role)}
            if role == "master" and config.http_bind:  # published on the host's address by the compose file
                given["GANG_MASTER_HTTP_BIND"] = f"0.0.0.0:{WEB_PORT}"
            lines = [f"{name}={value}" for name, value in given.items()]
            (self._settings_dir / f"{service}.env").write_text("".join(f"{line}\n" for line in lines))

    def _wait_for_nodes(self, state: DockerState, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        with MasterClient(state.master, timeout_s=1.0, keys=self.keys) as client:
            while time.monotonic() < deadline:
                try:
                    if sum(node.state == "up" for node in client.nodes()) >= state.config.nodes:
                        return
                except MasterUnreachable:
                    pass
                time.sleep(0.2)
        logs = self.compose("logs", "--tail", "20")
        self.down()
        raise ClusterError(f"the nodes did not register within {timeout_s:g} s:\n{logs[-3000:]}")


@contextmanager
def temporary_docker_cluster(config: ClusterConfig) -> Iterator[MasterClient]:
    """A fresh compose cluster, taken down with its volumes afterwards."""
    cluster = DockerCluster()
    if cluster.state() is not None:
        raise ClusterError("a docker cluster is already up: `gang cluster down --docker` first")
    try:
        state = cluster.up(config)
        with MasterClient(state.master, keys=cluster.keys) as client:
            yield client
    finally:
        cluster.down()


def _remove_empty_groups(folder: Path) -> None:
    """The groups the node daemons left in ``folder`` (a killed container's watchdog dies with it),
    deepest first; one that still holds a process stays."""
    for group in sorted((path for path in folder.rglob("*") if path.is_dir()), key=lambda path: -len(path.parts)):
        try:
            group.rmdir()
        except OSError:
            pass
