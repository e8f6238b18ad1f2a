"""The master daemon's settings: flags of ``gang master`` and GANG_MASTER_* variables."""

from pathlib import Path
from typing import Literal

from pydantic import Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

from gangsched.daemon.endpoints import DEFAULT_STATE_DIR, MASTER_SOCKET, REPORT_SOCKET, SWITCH_SOCKET, default_endpoint
from gangsched.policy.catalog import POLICY_NAMES, Choice
from gangsched.policy.matrix_settings import RESERVATION_DEPTH
from gangsched.policy.quantum import Pairing
from gangsched.policy.slack_settings import SlackSettings
from gangsched.protocol.array_ranges import MAX_ARRAY_INDEX
from gangsched.protocol.records import MpiKind
from gangsched.protocol.size_setting import Size

# the settings of one Ousterhout matrix, which a partition of the configuration file may set for its own
# (docs/configuration.md); the others are the master's, for every partition
PARTITION_SETTINGS = (
    "quantum_ms", "policy", "pairing", "coordination", "matching", "mpl", "reservation_depth",
    "default_mem_per_cpu", "default_estimate_s", "over_time_s", "migration_cost_s", "migrate_per_slice",
    "time_slice_s", "alpha", "longest_estimate_s", "most_large", "large_backfill", "slack_factor",
    "average_wait_s",
)


class MasterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GANG_MASTER_")

    # empty: an ipc socket in the state folder (see _sockets_in_state_dir)
    bind: str = Field("", description=f"ROUTER endpoint for nodes and clients [ipc://STATE_DIR/{MASTER_SOCKET}]")
    switch_bind: str = Field(
        "", description=f"PUB endpoint the slot switches go out on [ipc://STATE_DIR/{SWITCH_SOCKET}]"
    )
    report_bind: str = Field(
        "", description="PULL endpoint the nodes' quantum reports, heartbeats and exits come in on "
        f"[ipc://STATE_DIR/{REPORT_SOCKET}]"
    )
    keys: Path | None = Field(
        None, description="CURVE key folder (gang keygen); without it only ipc binds in 0700 folders are allowed"
    )
    config: Path | None = Field(
        None, description="the cluster's configuration file (TOML: docs/configuration.md), read again on gang admin "
        "reconfigure; flags and variables win over its [master] keys [/etc/gangsched/gangsched.toml where it exists]"
    )
    state_dir: Path = Field(Path(DEFAULT_STATE_DIR), description="where the job store (SQLite) lives")
    quantum_ms: int = Field(1000, ge=10, description="time slice; keep >= 100 for <1% overhead")
    heartbeat_ms: int = Field(500, ge=10, description="how often nodes must be heard from")
    heartbeat_misses: int = Field(3, ge=1, description="missed heartbeats before a node is down")
    report_interval_ms: int = Field(
        200, ge=0, description="the least time between two reports of a node: each holds the accounts of "
        "this / quantum quanta, at least one (more on large clusters: --reports-per-quantum)"
    )
    reports_per_quantum: int = Field(
        256, ge=1, description="about how many node reports the master reads per quantum: with more nodes "
        "up, each node sends its accounts every ceil(nodes / this) quanta, together in one report"
    )
    relay_fanout: int = Field(
        32, ge=0, le=1024, description="nodes homed at the master, and at each relay, beyond which nodes relay "
        "switches and node messages for others (docs/architecture.md, 'Relays'); 0: every node is homed at the master"
    )
    mpi_default: MpiKind = Field(
        MpiKind.NONE, description="the process-manager interface of a job that names none (Slurm's MpiDefault): "
        f"{', '.join(kind.value for kind in MpiKind)}"
    )
    default_mem_per_cpu: Size = Field(
        128 << 20, description="the memory per task of a job that asks for none (Slurm's DefMemPerCPU), e.g. 128M or "
        "1G: every job commits memory and runs under a limit (docs/memory.md)"
    )
    rejoin_s: float = Field(
        10.0, gt=0, description="after a restart, how long the nodes of running jobs have to say hello again"
    )
    store: str = Field(
        "", pattern=r"^$|^postgres(ql)?://", description="where the jobs are kept: empty for SQLite in "
        "STATE_DIR/jobs.db, or a PostgreSQL database, postgresql://USER@HOST/DATABASE (pip install "
        "'gangsched[postgresql]')"
    )
    lease_s: float = Field(
        1.5, ge=0.2, le=600, description="with a PostgreSQL store, how long the lead lasts unrenewed: a standby "
        "takes over this long after the leader was last heard from (docs/architecture.md, 'Leadership')"
    )
    return_to_service: int = Field(
        1, ge=0, le=1, description="1: a node lost without word is back in service when its daemon registers "
        "again; 0: it stays down (Not responding) until gang admin node resume (Slurm's ReturnToService)"
    )
    policy: str = Field(
        "gs", description=f"what starts and where: {', '.join(POLICY_NAMES)}; paired: gs with --pairing paired"
    )
    pairing: Literal["strict", "paired"] = Field(
        "strict", description="which rows run each quantum: one in turn (strict) or two complementary (paired)"
    )
    coordination: Literal["gang", "local"] = Field(
        "gang", description="gang: only the chosen rows run; local: every placed task runs at once and each "
        "node's kernel time-shares them (the uncoordinated baseline)"
    )
    matching: Literal["fair", "best-fit"] = Field(
        "fair", description="how paired rows find partners: once a round (fair) or each switch"
    )
    max_array_size: int = Field(
        1001, ge=1, le=MAX_ARRAY_INDEX + 1,
        description="array indices run from 0 to one less than this (Slurm's MaxArraySize; at most 4000001)")
    max_job_count: int = Field(
        100_000, ge=1, description="most jobs pending or running at once; a submission past it is refused "
        "whole (Slurm's MaxJobCount)")
    mpl: int = Field(8, ge=1, description="multiprogramming level: most rows in the matrix")
    reservation_depth: int = Field(
        RESERVATION_DEPTH, ge=1, description="bgs, mbgs: how many of the first queued jobs hold reservations and "
        "are tried at each scheduling event; the rest wait their turn (Flux's reservation-depth)")
    default_estimate_s: float = Field(
        86_400.0, gt=0, description="the time limit (estimate) of a job submitted without --estimate"
    )
    over_time_s: float = Field(2.0, ge=0, description="how long past its time limit a job runs before it is killed")
    cluster_name: str = Field("gangsched", pattern=r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$",
                              description="the cluster's name its jobs see (Slurm's ClusterName, SLURM_CLUSTER_NAME)")
    checkpoint_dir: Path | None = Field(
        None, description="a folder every node shares, where migrating tasks save their state; none: no migration"
    )
    migration_cost_s: float = Field(
        1.0, ge=0, description="C of MGS/MBGS until a migration was measured (then the measured mean)"
    )
    migrate_per_slice: int | None = Field(None, ge=1, description="Q of MGS/MBGS: tasks that may migrate per slice")
    time_slice_s: float = Field(200.0, gt=0, description="the slice Q counts over")
    alpha: float = Field(0.5, ge=0, le=1, description="gs-largeq: large above alpha x --longest-estimate-s")
    longest_estimate_s: float = Field(86_400.0, gt=0, description="gs-largeq: t_max, the longest estimate expected")
    most_large: int = Field(2, ge=1, description="gs-largeq: j_max, large jobs sharing a node at most")
    large_backfill: bool = Field(False, description="gs-largeq: backfill the large-job queue")
    slack_factor: float = Field(3.0, ge=0, description="slack: SF")
    average_wait_s: float = Field(2401.0, gt=0, description="slack: AWT, the site's average wait")
    sharp_change: float = Field(
        20.0, ge=0, description="utilization jump (points) that makes a job run alone; 0: off"
    )
    private_job_details: bool = Field(
        True, description="another user's job shows its owner, state and resources but not its command, "
        "environment or working folder, except to root (as Slurm's PrivateData=jobs keeps others' jobs), where "
        "the master has keys; false: everyone sees every job whole"
    )
    io_addr: str | None = Field(None, description="I/O server handed to synthetic I/O jobs")
    io_key: Path | None = Field(
        None, description="the key file the I/O server checks writes with (gang ioserver --key): each job's tasks "
        "get its HMAC of the job's id, GANG_IO_TOKEN; none: the server checks nothing"
    )
    http_bind: str = Field(
        "", description="HOST:PORT where a child process serves the metrics (/metrics) and the web view; "
        "off when empty; port 0 takes any free port, written to STATE_DIR/web-address. It asks for the token "
        "in STATE_DIR/web-token (loopback too: every account reaches it), and on loopback for a loopback Host:"
    )
    web_child: bool = Field(
        True, description="with --http-bind, serve the web view from a child process; false: only bind its "
        "socket, STATE_DIR/viewer/viewer.sock, for a web view run as a service of its own "
        "(deploy/systemd/gangsched-web.service)"
    )
    realtime_priority: int = Field(
        # above the node daemons' 30: where they share cores, the switch must reach every node
        # before the first to get it preempts the master's sending thread
        40, ge=0, le=99, description="SCHED_FIFO priority of the daemon; 0 keeps normal priority"
    )
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
    log_file: Path | None = Field(None, description="log here, rotated at 10 MiB (3 kept), not to stderr")

    @model_validator(mode="after")
    def _sockets_in_state_dir(self) -> "MasterSettings":
        self.bind = self.bind or default_endpoint(MASTER_SOCKET, self.state_dir)
        self.switch_bind = self.switch_bind or default_endpoint(SWITCH_SOCKET, self.state_dir)
        self.report_bind = self.report_bind or default_endpoint(REPORT_SOCKET, self.state_dir)
        return self

    @field_validator("http_bind")
    @classmethod
    def _host_and_port(cls, bind: str) -> str:
        host, _, port = bind.rpartition(":")
        if bind and not (host and port.isdigit() and 0 <= int(port) < 65536):
            raise ValueError(f"{bind!r} is not HOST:PORT")
        return bind

    @field_validator("policy")
    @classmethod
    def _known_policy(cls, policy: str) -> str:
        if policy not in [*POLICY_NAMES, "paired"]:
            raise ValueError(f"no policy {policy!r}: one of {', '.join(POLICY_NAMES)}, paired")
        return policy

    def choice(self) -> Choice:
        """The batch policy and its parameters (``paired`` is gs, paired)."""
        return Choice(
            policy="gs" if self.policy == "paired" else self.policy, mpl=self.mpl,
            migrate_per_slice=self.migrate_per_slice, migration_cost_s=self.migration_cost_s,
            time_slice_s=self.time_slice_s, alpha=self.alpha, most_large=self.most_large,
            large_backfill=self.large_backfill, reservation_depth=self.reservation_depth,
            slack=SlackSettings(slack_factor=self.slack_factor, average_wait_s=self.average_wait_s),
        )

    def pairing_used(self) -> Pairing:
        return "paired" if self.policy == "paired" else self.pairing
