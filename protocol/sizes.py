"""Memory sizes as Slurm spells them: a whole number and a unit, K, M, G or T (powers of 1024),
M when none is given (``--mem 300`` is 300 MiB), as ``sbatch --mem`` reads them; a B alone means
bytes (what ``format_size`` writes for a size of no whole K). Plain text: the settings' ``Size``
type, which needs pydantic, is ``size_setting``'s, so that a command that only reads a size loads
none of it."""

import re

UNITS = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
LARGEST = (1 << 63) - 1  # what the kernel's memory.max and SQLite's integers hold
_SIZE = re.compile(r"(?P<number>\d+)(?P<unit>[KMGT]?)(?P<bytes>B?)", re.IGNORECASE)


class SizeError(ValueError):
    pass


def parse_size(text: str) -> int:
    """Bytes; a size that is not a whole number above 0 with a known unit, or that is 2^63 bytes or
    more, is refused with one line that says why."""
    match = _SIZE.fullmatch(text.strip())
    if match is None:
        raise SizeError(f"{text!r} is not a size: a whole number and K, M, G or T (M if none), e.g. 300M or 4G")
    number = int(match["number"])
    unit = match["unit"].upper() or ("B" if match["bytes"] else "M")  # 300B: bytes, as format_size writes them
    size = number * UNITS.get(unit, 1)
    if size == 0:
        raise SizeError(f"{text!r}: a size must be above 0")
    if size > LARGEST:
        raise SizeError(f"{text!r} is 2^63 bytes or more: no memory is that large")
    return size


def format_size(size: int) -> str:
    """The largest unit that gives a whole number, as Slurm prints memory: 300M, 4G, 1536K."""
    for unit in "TGM":
        if size % UNITS[unit] == 0:
            return f"{size // UNITS[unit]}{unit}"
    if size % UNITS["K"] == 0:
        return f"{size // UNITS['K']}K"
    return f"{size}B"


def readable(size: int) -> str:
    """A size in words: exact where a unit gives a whole number (300M), else to a tenth (11.5G)."""
    exact = format_size(size)
    if not exact.endswith(("K", "B")):
        return exact
    for unit in "TGMK":
        if size >= UNITS[unit]:
            return f"{size / UNITS[unit]:.1f}{unit}"
    return f"{size}B"
