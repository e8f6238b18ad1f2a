"""What `gang submit` reads from text, as sbatch does: a script's ``#GANG`` directive lines,
``--dependency`` and ``--array``. Plain functions; a mistake is a ValueError that says where."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without its import (docs/limits.md, "A submission's imports")
if TYPE_CHECKING:
    from pathlib import Path

DIRECTIVE = "#GANG"
# a directive line's length: options of a few words each, and a limit shlex's pure-Python split keeps within
# milliseconds (a line of 10 MB had kept gang submit busy for minutes)
DIRECTIVE_MAX = 4096


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
    import shlex  # here, not above: an ordinary submission has no script to read (cli/quick_submit.py)

    options: list[str] = []
    with path.open(encoding="utf-8", errors="replace") as script:
        for number, line in enumerate(script, start=1):
            text = line.strip()
            if text.startswith(DIRECTIVE) and (len(text) == len(DIRECTIVE) or text[len(DIRECTIVE)].isspace()):
                if len(text) > DIRECTIVE_MAX:
                    raise ValueError(f"{path}:{number}: a {DIRECTIVE} line is at most {DIRECTIVE_MAX} characters, "
                                     f"this one {len(text)}")
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


