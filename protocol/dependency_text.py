"""Slurm's ``--dependency`` as text, read into a job's fields and written back as Slurm writes them:
``afterok:ID[:ID...]``, ``afterany:...``, ``afternotok:...`` and ``singleton``, comma-separated, all of them
required (sbatch(1); ``?``, any of them, is refused). One grammar for ``gang submit``, sbatch, ``gang update``
and scontrol; what each kind waits for is the master's (master/dependencies.py).

Plain code without pydantic or typing: sbatch's start reads it."""

from __future__ import annotations

TYPE_CHECKING = False  # typing's flag without its import
if TYPE_CHECKING:
    from typing import Any

# Slurm's word for each kind -> the job's field (JobSpec) that holds its ids
KINDS = {"afterok": "after_ok", "afterany": "after_any", "afternotok": "after_not_ok"}
NONE: dict[str, Any] = {"after_ok": [], "after_any": [], "after_not_ok": [], "singleton": False}


def read_dependency(text: str) -> dict[str, Any]:
    """The job's dependency fields from ``text``; raises ValueError in one line."""
    if "?" in text:
        raise ValueError(f"{text!r}: '?' (any one of them) is not supported: give them all, by comma")
    found: dict[str, list[int]] = {field: [] for field in KINDS.values()}
    singleton = False
    for part in text.split(","):
        word = part.strip()
        if word == "singleton":
            singleton = True
            continue
        kind, _, ids = word.partition(":")
        if kind not in KINDS or not ids:
            raise ValueError(f"{word!r}: a dependency is afterok:ID[:ID...], afterany:ID[:ID...], "
                             "afternotok:ID[:ID...] or singleton")
        for job_id in ids.split(":"):
            if not job_id.isdigit() or int(job_id) == 0:
                raise ValueError(f"{word!r}: {job_id!r} is not a job id")
            found[KINDS[kind]].append(int(job_id))
    return {**found, "singleton": singleton}


def dependency_text(fields: dict[str, Any]) -> str:
    """``fields`` (a job's, or a map of them) as Slurm writes the dependency: ``afterok:12,singleton``; "" for
    none."""
    parts = [f"{kind}:{job_id}" for kind, field in KINDS.items() for job_id in fields.get(field) or ()]
    return ",".join(parts + (["singleton"] if fields.get("singleton") else []))
