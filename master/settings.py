"""The master daemon's settings: flags of ``gang master`` and GANG_MASTER_* variables."""

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict


class MasterSettings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="GANG_MASTER_")

    bind: str = Field("tcp://127.0.0.1:7070", description="ROUTER endpoint for nodes and clients")
    switch_bind: str = Field("tcp://127.0.0.1:7071", description="PUB endpoint the slot switches go out on")
    keys: Path | None = Field(
        None, description="CURVE key folder (gang keygen); without it only loopback and ipc binds are allowed"
    )
    state_dir: Path = Field(
        Path.home() / ".gangsched" / "master", description="where the job store (SQLite) lives"
    )
    quantum_ms: int = Field(1000, ge=10, description="time slice; keep >= 100 for <1% overhead")
    heartbeat_ms: int = Field(500, ge=10, description="how often nodes must be heard from")
    heartbeat_misses: int = Field(3, ge=1, description="missed heartbeats before a node is down")
    mpl: int = Field(8, ge=1, description="multiprogramming level: most rows in the matrix")
    policy: Literal["strict", "paired"] = Field(
        "strict", description="strict: one row a quantum; paired: two complementary rows"
    )
    matching: Literal["fair", "best-fit"] = Field(
        "fair", description="how paired rows find partners: once a round (fair) or each switch"
    )
    sharp_change: float = Field(
        20.0, ge=0, description="utilization jump (points) that makes a job run alone; 0: off"
    )
    io_addr: str | None = Field(None, description="I/O server handed to synthetic I/O jobs")
    realtime_priority: int = Field(
        # above the node daemons' 30: where they share cores, the switch must reach every node
        # before the first to get it preempts the master's sending thread
        40, ge=0, le=99, description="SCHED_FIFO priority of the daemon; 0 keeps normal priority"
    )
    log_level: str = Field("INFO", description="DEBUG, INFO, WARNING or ERROR")
