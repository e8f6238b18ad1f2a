"""A job's ``--output`` pattern, as Slurm's filename patterns: ``%j`` the job, ``%t`` the rank,
``%A`` the array's first job, ``%a`` the index in the array, ``%%`` a ``%``.

The master fills in the array's ids (it sets them), the node the job and rank; the last to
fill in (``final``) also turns ``%%`` into ``%``, so that ``%%A`` stays a literal ``%A`` until
then. Any other ``%`` and its letter are left as they are.
"""

from collections.abc import Mapping


def expand(pattern: str, values: Mapping[str, object], final: bool) -> str:
    """``pattern`` with each ``%X`` whose letter ``values`` has replaced by its value."""
    out: list[str] = []
    index = 0
    while index < len(pattern):
        character = pattern[index]
        letter = pattern[index + 1] if index + 1 < len(pattern) else ""
        if character != "%" or not letter:
            out.append(character)
            index += 1
        elif letter == "%":
            out.append("%" if final else "%%")
            index += 2
        elif letter in values:
            out.append(str(values[letter]))
            index += 2
        else:
            out.append(character + letter)
            index += 2
    return "".join(out)
