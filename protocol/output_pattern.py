"""A job's ``--output`` and ``--error`` patterns, as Slurm's filename patterns (sbatch(1), "filename
pattern"): ``%j`` the job, ``%J`` job.step, ``%s`` the step, ``%t`` the rank, ``%x`` the job's name, ``%u``
its user, ``%N`` the node, ``%n`` the node's place in the job, ``%A`` the array's first job, ``%a`` the
index in the array, ``%%`` a ``%``.

The master fills in the name, user and the array's ids, the node the rest; the last to
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
            value = str(values[letter])
            out.append(value if final else value.replace("%", "%%"))  # a later pass reads it as it is
            index += 2
        else:
            out.append(character + letter)
            index += 2
    return "".join(out)
