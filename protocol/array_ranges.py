"""A job array's indices as ranges, the way Slurm writes them: ``0-9999:2,12%50``.

An array goes over the wire as its ranges, not its indices (an array may have
millions), and a listing shows the indices that wait as ranges again
(``12_[5-9999]``). One module for the client, the master and the listings.
"""

from collections.abc import Iterable, Iterator

# Slurm's MaxArraySize is at most 4,000,001: indices up to 4,000,000 (the master's --max-array-size bounds them)
MAX_ARRAY_INDEX = 4_000_000
MAX_ARRAY_RANGES = 1000  # comma-separated parts of one --array

IndexRange = tuple[int, int, int]  # first, last, step


def parse_array(text: str) -> tuple[list[IndexRange], int | None]:
    """Slurm's ``--array``: indices and ranges with an optional step, comma-separated, and an optional
    throttle (``0-15``, ``1,3,5``, ``0-20:5``, ``0-9999%50``); ValueError with the reason if not."""
    spans, percent, limit_text = text.partition("%")
    limit = None
    if percent:
        if not limit_text.strip().isdigit() or int(limit_text) < 1:
            raise ValueError(f"{text!r}: the throttle after % is how many run at once, 1 or more")
        limit = int(limit_text)
    ranges: list[IndexRange] = []
    for part in spans.split(","):
        span, _, step_text = part.strip().partition(":")
        first_text, dash, last_text = span.partition("-")
        try:
            first = int(first_text)
            last = int(last_text) if dash else first
            step = int(step_text) if step_text else 1
        except ValueError:
            raise ValueError(f"{part.strip()!r}: an array is indices or ranges A-B[:STEP], comma-separated") from None
        ranges.append((first, last - (last - first) % step if step > 0 else last, step))
    problem = array_problem(ranges)
    if problem is not None:
        raise ValueError(f"{text!r}: {problem}")
    if limit is not None and limit > array_size(ranges):
        raise ValueError(f"{text!r}: a throttle of {limit} is more than the array's {array_size(ranges)} jobs")
    return ranges, limit


def array_problem(ranges: list[IndexRange]) -> str | None:
    """Why these ranges are no array, if they are not one."""
    if not 1 <= len(ranges) <= MAX_ARRAY_RANGES:
        return f"an array has 1 to {MAX_ARRAY_RANGES} ranges"
    for first, last, step in ranges:
        if not 0 <= first <= last <= MAX_ARRAY_INDEX or step < 1:
            return f"{first}-{last}:{step}: indices run from 0 to {MAX_ARRAY_INDEX}, upwards, in steps of 1 or more"
    spans = sorted((first, last) for first, last, _ in ranges)
    for (_, last), (first, _) in zip(spans, spans[1:]):
        if first <= last:
            return "ranges may not overlap: an index is given once"
    return None


def array_size(ranges: Iterable[IndexRange]) -> int:
    return sum((last - first) // step + 1 for first, last, step in ranges)


def array_indices(ranges: Iterable[IndexRange]) -> Iterator[int]:
    """The indices, in the order given."""
    for first, last, step in ranges:
        yield from range(first, last + 1, step)


def span(ranges: Iterable[IndexRange]) -> tuple[int, int, int, int]:
    """An array's count of jobs, lowest and highest index, and the step between its indices, increasing (1
    where they are not evenly spaced)."""
    # each range as the indices it reaches, in order: the gaps between them and their steps, without listing
    # millions of indices
    parts = sorted((first, first + (last - first) // step * step, step) for first, last, step in ranges)
    steps = {step for first, last, step in parts if last > first}
    steps |= {later[0] - earlier[1] for earlier, later in zip(parts, parts[1:])}
    return array_size(parts), parts[0][0], max(last for _, last, _ in parts), steps.pop() if len(steps) == 1 else 1


def compact(indices: Iterable[int]) -> str:
    """Increasing indices as Slurm shows them: runs of consecutive ones as ``A-B`` (``5-9999,10002``)."""
    parts: list[str] = []
    start = previous = None
    for index in indices:
        if previous is not None and index == previous + 1:
            previous = index
            continue
        if start is not None:
            parts.append(str(start) if start == previous else f"{start}-{previous}")
        start = previous = index
    if start is not None:
        parts.append(str(start) if start == previous else f"{start}-{previous}")
    return ",".join(parts)


def shown_job_id(job_id: int, array_job_id: int | None, pending: str | None) -> str:
    """A job's id as listings show it; a pending array's waiting jobs (``pending``, their indices as
    ``compact`` gives them) shown as one, as squeue shows them: ``12_[5-9999]``."""
    return str(job_id) if pending is None else f"{array_job_id}_[{pending}]"
