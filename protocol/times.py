"""Points in time as Slurm spells them (``scontrol create reservation StartTime=...``): ``now``,
``now+N`` with a unit (``seconds`` by default, ``minutes``, ``hours``, ``days``, ``weeks``; Slurm reads
any prefix of them), and ISO dates ``YYYY-MM-DD[THH:MM[:SS]]`` in local time. Plain text, as
``durations`` is: the master reads them against its own clock."""

import re
import time

_RELATIVE = re.compile(r"now(?:\+(?P<count>\d+)(?P<unit>[a-z]*))?")
_UNITS = {"seconds": 1, "minutes": 60, "hours": 3600, "days": 86_400, "weeks": 604_800}
_ISO = ("%Y-%m-%dT%H:%M:%S", "%Y-%m-%dT%H:%M", "%Y-%m-%d")


class TimeError(ValueError):
    pass


def parse_time(text: str, now: float) -> float:
    """Unix seconds; a text Slurm would not read is refused with one line saying why."""
    spelled = text.strip().lower()
    relative = _RELATIVE.fullmatch(spelled)
    if relative is not None:
        if relative["count"] is None:
            return now
        unit = relative["unit"] or "seconds"
        found = [seconds for name, seconds in _UNITS.items() if name.startswith(unit)]
        if len(found) != 1:
            raise TimeError(f"{text!r}: the unit is one of {', '.join(_UNITS)}")
        return now + int(relative["count"]) * found[0]
    for layout in _ISO:
        try:
            return time.mktime(time.strptime(text.strip(), layout))
        except ValueError:
            continue
    raise TimeError(f"{text!r} is not a time: now, now+COUNT[minutes|hours|days|weeks], YYYY-MM-DD[THH:MM[:SS]]")


def format_time(unix: float) -> str:
    """As Slurm prints a time: ``YYYY-MM-DDTHH:MM:SS``, local."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(unix))
