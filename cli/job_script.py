"""What `gang submit` reads from text, as sbatch does: a script's ``#GANG`` directive lines,
``--dependency`` and ``--array``. Plain functions; a mistake is a ValueError that says where."""

import shlex
from pathlib import Path

from gangsched.protocol.records import MAX_ARRAY_INDEX, MAX_ARRAY_JOBS

DIRECTIVE = "#GANG"


def is_script(path: str) -> bool:
    """A file that starts with ``#!``: one that may carry directives."""
    try:
        with open(path, "rb") as file:
            return file.read(2) == b"#!"
    except OSError:
        return False


def directives(path: Path) -> list[str]:
    """The options on the script's ``#GANG`` lines, in order. As sbatch reads ``#SBATCH``, only
    the lines before its first command count: a directive after it is taken for a comment."""
    options: list[str] = []
    with path.open(encoding="utf-8", errors="replace") as script:
        for number, line in enumerate(script, start=1):
            text = line.strip()
            if text.startswith(DIRECTIVE) and (len(text) == len(DIRECTIVE) or text[len(DIRECTIVE)].isspace()):
                try:
                    options += shlex.split(text[len(DIRECTIVE):], comments=True)
                except ValueError as error:
                    raise ValueError(f"{path}:{number}: {error}") from None
            elif text and not text.startswith("#"):
                break
    return options


def dependency(text: str) -> tuple[list[int], list[int]]:
    """``afterok:ID[:ID...]`` and/or ``afterany:ID[:ID...]``, comma-separated (Slurm's
    ``--dependency``, all of them required): the jobs after_ok and after_any."""
    after: dict[str, list[int]] = {"afterok": [], "afterany": []}
    for part in text.split(","):
        kind, _, ids = part.strip().partition(":")
        if kind not in after or not ids:
            raise ValueError(f"{part.strip()!r}: a dependency is afterok:ID[:ID...] or afterany:ID[:ID...]")
        for job_id in ids.split(":"):
            if not job_id.isdigit() or int(job_id) == 0:
                raise ValueError(f"{part.strip()!r}: {job_id!r} is not a job id")
            after[kind].append(int(job_id))
    return after["afterok"], after["afterany"]


def array(text: str) -> list[int]:
    """Slurm's ``--array``: indices and ranges with an optional step, comma-separated
    (``0-15``, ``1,3,5``, ``0-20:5``), in the order given."""
    indices: list[int] = []
    for part in text.split(","):
        span, _, step_text = part.strip().partition(":")
        first_text, dash, last_text = span.partition("-")
        try:
            first = int(first_text)
            last = int(last_text) if dash else first
            step = int(step_text) if step_text else 1
        except ValueError:
            raise ValueError(f"{part.strip()!r}: an array is indices or ranges A-B[:STEP], comma-separated") from None
        if not 0 <= first <= last <= MAX_ARRAY_INDEX or step < 1:
            raise ValueError(f"{part.strip()!r}: indices run from 0 to {MAX_ARRAY_INDEX}, a range upwards")
        indices += range(first, last + 1, step)
        if len(indices) > MAX_ARRAY_JOBS:
            raise ValueError(f"an array has at most {MAX_ARRAY_JOBS} jobs")
    if len(set(indices)) != len(indices):
        raise ValueError(f"{text!r}: an index is given twice")
    return indices
