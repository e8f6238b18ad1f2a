"""What the node daemons and the job commands read of the cluster's configuration file: the masters,
``[cluster] masters`` (Slurm's ``SlurmctldHost`` lines), the first tried first (docs/configuration.md).

Read with the standard library alone, so that a job command stays quick (``cli/quick_submit.py``
imports neither pydantic nor click); the master's check of the whole file (``master/config_file.py``)
checks this section with the same function, so a list means the same to every reader.
"""

import os
import re

# where a real host keeps it (docs/install.md); a string: a job command loads no pathlib
DEFAULT_CONFIG = "/etc/gangsched/gangsched.toml"
CONFIG_VARIABLE = "GANG_CONFIG"  # names another file for the job commands
_ENDPOINT = r"(tcp|ipc)://[^,\s]+"  # compiled at its first use: a job command reads no file

Location = tuple[str | int, ...]


class ClusterFileError(Exception):
    """A file the masters cannot be read from: one line, naming the file."""


def masters_of(section: object) -> tuple[str | None, list[tuple[Location, str]]]:
    """``[cluster]``'s masters as a comma list (None: it lists none), and its problems, each with where."""
    if not isinstance(section, dict):
        return None, [(("cluster",), "[cluster] is a table")]
    problems: list[tuple[Location, str]] = [(("cluster", key), "no such key: [cluster] has masters")
                                            for key in section if key != "masters"]
    given = section.get("masters")
    if given is None:
        return None, problems
    listed = given.split(",") if isinstance(given, str) else given
    if not isinstance(listed, list) or not listed:
        return None, [*problems, (("cluster", "masters"), "a list of the masters' endpoints, or one string of "
                                  "them by commas: [\"tcp://m1:7070\", \"tcp://m2:7070\"]")]
    for index, endpoint in enumerate(listed):
        if not isinstance(endpoint, str) or not re.fullmatch(_ENDPOINT, endpoint):
            problems.append((("cluster", "masters", index), f"{endpoint!r} is not a master's endpoint: "
                             "tcp://HOST:PORT or ipc://PATH"))
    if len(set(listed)) < len(listed):
        problems.append((("cluster", "masters"), "a master is listed twice"))
    return (None if problems else ",".join(listed)), problems


def configured_masters(path: str | os.PathLike[str] | None = None) -> str | None:
    """The masters the configuration file lists, as a comma list: ``path``'s, else the file GANG_CONFIG
    names, else ``DEFAULT_CONFIG`` where it exists and this account may read it; None where there is no
    such file or it lists none.
    ``ClusterFileError`` where the file cannot be read or its ``[cluster]`` is wrong."""
    named = path or os.environ.get(CONFIG_VARIABLE) or None
    if named is None and not os.access(DEFAULT_CONFIG, os.R_OK):
        return None  # none here, or one this account may not read (the masters' own): as if none
    chosen = named or DEFAULT_CONFIG
    import tomllib  # here, not above: most job commands find no file, and the parser is a tenth of their start

    try:
        with open(chosen) as file:
            data = tomllib.loads(file.read())
    except OSError as error:
        raise ClusterFileError(f"{chosen}: cannot read it: {error.strerror}") from None
    except tomllib.TOMLDecodeError as error:
        raise ClusterFileError(f"{chosen}: not TOML: {error}") from None
    masters, problems = masters_of(data.get("cluster", {}))
    if problems:
        where, message = problems[0]
        raise ClusterFileError(f"{chosen}: {key_name(where)}: {message} (gang admin config check {chosen})")
    return masters


def key_name(location: Location) -> str:
    """A key as the checks name it: ``partitions[1].quantum_ms``."""
    return ".".join(str(part) if isinstance(part, str) else f"[{part}]" for part in location).replace(".[", "[")
