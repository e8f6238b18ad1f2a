"""Lengths of time as Slurm spells them (``--time``, a partition's ``MaxTime``): ``MM``,
``MM:SS``, ``HH:MM:SS``, ``D-HH``, ``D-HH:MM`` or ``D-HH:MM:SS``; a bare number is minutes;
``UNLIMITED`` or ``INFINITE`` is no limit at all. Plain text, as ``sizes`` is."""

import re

_DAYS = re.compile(r"(?P<days>\d+)-(?P<rest>[\d:]+)")
UNLIMITED = ("unlimited", "infinite")


class DurationError(ValueError):
    pass


def parse_duration(text: str) -> float | None:
    """Seconds; None for no limit. A text Slurm would not read is refused with one line saying why."""
    spelled = text.strip()
    if spelled.lower() in UNLIMITED:
        return None
    days, rest, with_days = 0, spelled, _DAYS.fullmatch(spelled)
    if with_days is not None:
        days, rest = int(with_days["days"]), with_days["rest"]
    parts = rest.split(":")
    if not all(part.isdigit() for part in parts) or len(parts) > 3:
        raise DurationError(f"{text!r} is not a time: MM, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS or UNLIMITED")
    numbers = [int(part) for part in parts]
    if with_days is not None:  # D-HH, D-HH:MM, D-HH:MM:SS: hours come first
        hours, minutes, seconds = (numbers + [0, 0])[:3]
    elif len(numbers) == 3:
        hours, minutes, seconds = numbers
    else:  # MM or MM:SS: minutes come first
        hours, (minutes, seconds) = 0, (numbers + [0])[:2]
    total = ((days * 24 + hours) * 60 + minutes) * 60 + seconds
    if total <= 0:
        raise DurationError(f"{text!r}: a time must be above 0")
    return float(total)


def format_duration(seconds: float | None) -> str:
    """As Slurm prints a limit: ``MM:SS``, ``HH:MM:SS`` or ``D-HH:MM:SS``; ``UNLIMITED`` for None."""
    if seconds is None:
        return "UNLIMITED"
    whole = int(round(seconds))
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"
