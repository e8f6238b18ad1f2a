"""What `gang submit` and sbatch read from text: a script's directive lines (``#GANG``, ``#SBATCH``),
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
    """The options on the script's ``#GANG`` lines, in order."""
    text = path.read_text(encoding="utf-8", errors="replace")
    return [option for _, options in directive_lines(text, DIRECTIVE, str(path)) for option in options]


def directive_lines(text: str, prefix: str, where: str) -> list[tuple[int, list[str]]]:
    """The options on a script's directive lines (``prefix``: ``#GANG``, ``#SBATCH``), each line's number
    and its options, in order. As sbatch reads ``#SBATCH``, only the lines before its first command count:
    a directive after it is taken for a comment. A mistake names ``where`` and the line."""
    import shlex  # here, not above: an ordinary submission has no script to read (cli/quick_submit.py)

    found: list[tuple[int, list[str]]] = []
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith(prefix) and (len(stripped) == len(prefix) or stripped[len(prefix)].isspace()):
            if len(stripped) > DIRECTIVE_MAX:
                raise ValueError(f"{where}:{number}: a {prefix} line is at most {DIRECTIVE_MAX} characters, "
                                 f"this one {len(stripped)}")
            try:
                found.append((number, shlex.split(stripped[len(prefix):], comments=True)))
            except ValueError as error:
                raise ValueError(f"{where}:{number}: {error}") from None
        elif stripped and not stripped.startswith("#"):
            break
    return found


