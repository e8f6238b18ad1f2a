"""Where a user's clusters keep their state (GANG_HOME), and the master of the cluster there.

Read with the standard library only: the job commands (`gang queue`, `gang submit`) find
their master here without loading the code that starts clusters."""

import json
import os
from pathlib import Path
from typing import NamedTuple

LOCAL_STATE = "cluster.json"  # `gang cluster up`: the daemons, the master's endpoint, the settings
DOCKER_STATE = "docker.json"  # `gang cluster up --docker`
KEYS = "keys"  # CURVE keys of a cluster with keys


def default_home() -> Path:
    return Path(os.environ.get("GANG_HOME", Path.home() / ".gangsched"))


class ClusterMaster(NamedTuple):  # no dataclass: see cli/table.py
    endpoint: str
    keys: Path | None  # the key folder to talk to it with, if it has keys


def cluster_master(home: Path | None = None) -> ClusterMaster | None:
    """The master of the local cluster in ``home``, else of its docker cluster; None if neither is up."""
    home = (home or default_home()).resolve()
    for name, keyed in ((LOCAL_STATE, None), (DOCKER_STATE, True)):
        try:
            raw = json.loads((home / name).read_text())
        except (OSError, ValueError):
            continue
        has_keys = keyed or bool(raw.get("config", {}).get("keys"))
        return ClusterMaster(raw["master"], home / KEYS if has_keys else None)
    return None
