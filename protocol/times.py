"""Points in time as Slurm spells them (``sbatch --begin``, ``sacct -S``, ``scontrol create reservation
StartTime=...``), the one grammar of them: ``now``, ``now+N`` or ``now-N`` with a unit (``seconds`` by
default, ``minutes``, ``hours``, ``days``, ``weeks``; Slurm reads any prefix of them, so ``now-2h`` is two
hours ago), ISO dates ``YYYY-MM-DD[THH:MM[:SS[.FRACTION]]]`` (the fraction as isoformat() writes it;
Slurm takes none), ``MMDD[YY]``, ``MM/DD[/YY]`` and ``MM.DD[.YY]`` (this year where none is given), each
with ``-HH:MM[:SS]`` or at midnight, ``HH:MM[:SS][AM|PM]`` today, and ``today``, ``tomorrow``,
``midnight``, ``noon``, ``elevenses``, ``fika`` and ``teatime`` (11, 15 and 16 o'clock), in local time.
Plain text, as ``durations`` is: the master reads them against its own clock, a command against the
machine's."""

import re
import time

_RELATIVE = re.compile(r"now(?:(?P<sign>[+-])(?P<count>\d+)(?P<unit>[a-z]*))?")
_CLOCK_TEXT = r"(?P<hour>\d{1,2}):(?P<minute>\d{2})(?::(?P<second>\d{2}))?(?P<half>am|pm)?"
_CLOCK = re.compile(_CLOCK_TEXT)
_DAY = re.compile(r"(?P<month>\d{2})(?P<mark>[/.]?)(?P<day>\d{2})(?:(?P=mark)(?P<year>\d{2}))?"
                  r"(?:-" + _CLOCK_TEXT + ")?")
_HOURS = {"today": 0, "midnight": 0, "tomorrow": 0, "noon": 12, "elevenses": 11, "fika": 15, "teatime": 16}
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
    day = _DAY.fullmatch(spelled)
    if day is not None:
        return _on_day(day, now)
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
                    "MM/DD[/YY][-HH:MM[:SS]], HH:MM[:SS][AM|PM], today, tomorrow, midnight or noon")


def _named(spelled: str, now: float) -> float | None:
    """A time of day today (``HH:MM[:SS]``, ``midnight``, ``noon``) or ``today`` / ``tomorrow`` at midnight."""
    clock = _CLOCK.fullmatch(spelled)
    day = time.localtime(now)
    if clock is not None:
        hour, minute, second = _time_of_day(clock, spelled)
    elif spelled in _HOURS:
        hour, minute, second = _HOURS[spelled], 0, 0
    else:
        return None
    days = 1 if spelled == "tomorrow" else 0
    return time.mktime((day.tm_year, day.tm_mon, day.tm_mday + days, hour, minute, second, 0, 0, -1))


def _time_of_day(clock: re.Match[str], spelled: str) -> tuple[int, int, int]:
    hour, minute, second = int(clock["hour"]), int(clock["minute"]), int(clock["second"] or 0)
    if clock["half"] is not None:
        if not 1 <= hour <= 12:
            raise TimeError(f"{spelled!r}: a time of day with AM or PM has an hour from 1 to 12")
        hour = hour % 12 + (12 if clock["half"] == "pm" else 0)
    if hour > 23 or minute > 59 or second > 59:
        raise TimeError(f"{spelled!r}: a time of day is HH:MM[:SS] from 00:00:00 to 23:59:59")
    return hour, minute, second


def _on_day(day: re.Match[str], now: float) -> float:
    """``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]``, at ``-HH:MM[:SS]`` or midnight; this year without one."""
    month, date = int(day["month"]), int(day["day"])
    year = 2000 + int(day["year"]) if day["year"] else time.localtime(now).tm_year
    hour, minute, second = (0, 0, 0) if day["hour"] is None else _time_of_day(day, day.group(0))
    if not 1 <= month <= 12 or not 1 <= date <= 31:
        raise TimeError(f"{day.group(0)!r}: a month is 01 to 12 and a day 01 to 31")
    return time.mktime((year, month, date, hour, minute, second, 0, 0, -1))


def format_time(unix: float) -> str:
    """As Slurm prints a time: ``YYYY-MM-DDTHH:MM:SS``, local."""
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.localtime(unix))
