"""Where a user's clusters keep their state (GANG_HOME), and the master of the cluster there.

Read with the standard library only, and without pathlib: the job commands (`gang queue`,
`gang submit`) find their master here without loading the code that starts clusters."""

import os

LOCAL_STATE = "cluster.json"  # `gang cluster up`: the daemons, the master's endpoint, the settings
DOCKER_STATE = "docker.json"  # `gang cluster up --docker`
KEYS = "keys"  # CURVE keys of a cluster with keys


def default_home() -> str:
    return os.environ.get("GANG_HOME", os.path.join(os.path.expanduser("~"), ".gangsched"))


class ClusterMaster:  # neither a dataclass nor a NamedTuple: a submission loads neither module
    def __init__(self, endpoint: str, keys: str | None) -> None:
        self.endpoint = endpoint
        self.keys = keys  # the key folder to talk to it with, if it has keys


def cluster_master(home: str | os.PathLike[str] | None = None) -> ClusterMaster | None:
    """The master of the local cluster in ``home``, else of its docker cluster; None if neither is up."""
    folder = os.path.realpath(home or default_home())
    for name, keyed in ((LOCAL_STATE, None), (DOCKER_STATE, True)):
        try:
            with open(os.path.join(folder, name)) as state:
                text = state.read()
        except OSError:
            continue
        import json  # here: most commands name their master and read no state

        try:
            raw = json.loads(text)
        except ValueError:
            continue
        has_keys = keyed or bool(raw.get("config", {}).get("keys"))
        return ClusterMaster(raw["master"], os.path.join(folder, KEYS) if has_keys else None)
    return None
