"""Points in time as Slurm spells them (``sbatch --begin``, ``sacct -S``, ``scontrol create reservation
StartTime=...``), the one grammar of them: ``now``, ``now+N`` or ``now-N`` with a unit (``seconds`` by
default, ``minutes``, ``hours``, ``days``, ``weeks``; Slurm reads any prefix of them, so ``now-2h`` is two
hours ago), ISO dates ``YYYY-MM-DD[THH:MM[:SS[.FRACTION]]]`` (the fraction as isoformat() writes it;
Slurm takes none), ``HH:MM[:SS]`` today, and ``today``, ``tomorrow``,
``midnight`` and ``noon``, in local time. Plain text, as ``durations`` is: the master reads them against
its own clock, a command against the machine's."""

import re
import time

_RELATIVE = re.compile(r"now(?:(?P<sign>[+-])(?P<count>\d+)(?P<unit>[a-z]*))?")
_CLOCK = re.compile(r"(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?")
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
        return now + (1 if relative["sign"] == "+" else -1) * int(relative["count"]) * found[0]
    named = _named(spelled, now)
    if named is not None:
        return named
    spelt = text.strip()
    whole, dot, fraction = spelt.partition(".")  # a fraction of a second, as isoformat() writes it
    if dot and fraction.isdigit():
        try:
            return time.mktime(time.strptime(whole, _ISO[0])) + float(f"0.{fraction}")
        except ValueError:
            pass
    for layout in _ISO:
        try:
            return time.mktime(time.strptime(spelt, layout))
        except ValueError:
            continue
    raise TimeError(f"{text!r} is not a time: now[+|-COUNT[minutes|hours|days|weeks]], YYYY-MM-DD[THH:MM[:SS]], "
                    "HH:MM[:SS], today, tomorrow, midnight or noon")


def _named(spelled: str, now: float) -> float | None:
    """A time of day today (``HH:MM[:SS]``, ``midnight``, ``noon``) or ``today`` / ``tomorrow`` at midnight."""
    clock = _CLOCK.fullmatch(spelled)
    day = time.localtime(now)
    if clock is not None:
        hour, minute, second = int(clock["hour"]), int(clock["minute"]), int(clock["second"] or 0)
        if hour > 23 or minute > 59 or second > 59:
            raise TimeError(f"{spelled!r}: a time of day is HH:MM[:SS] from 00:00:00 to 23:59:59")
    elif spelled in ("today", "midnight", "tomorrow", "noon"):
        hour, minute, second = (12 if spelled == "noon" else 0), 0, 0
    else:
        return None
    days = 1 if spelled == "tomorrow" else 0
    return time.mktime((day.tm_year, day.tm_mon, day.tm_mday + days, hour, minute, second, 0, 0, -1))


def format_time(unix: float) -> str:
    """As Slurm prints a time: ``YYYY-MM-DDTHH:MM:SS``, local."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(unix))
