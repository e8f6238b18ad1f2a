"""An even split of some cores between some parts (emulated nodes, a node's processors)."""

from collections.abc import Sequence


def even_share(part: int, parts: int, cores: Sequence[int]) -> list[int]:
    """The cores part ``part`` (from 0) of ``parts`` keeps to.

    Parts share a core when there are more parts than cores, so that each
    keeps to its own CPU instead of racing the others over all cores (which
    leaves cores idle at a job's barriers).
    """
    ordered = sorted(cores)
    if parts >= len(ordered):
        return [ordered[part * len(ordered) // parts]]
    per_part = len(ordered) // parts
    return ordered[part * per_part:(part + 1) * per_part]
