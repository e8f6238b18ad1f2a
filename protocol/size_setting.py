"""A setting read as a memory size (``Size``): bytes, or Slurm's text (protocol/sizes.py), in the
daemons' typed settings."""

from typing import Annotated, get_args

from pydantic import BeforeValidator, Field
from pydantic.fields import FieldInfo

from gangsched.protocol.sizes import LARGEST, parse_size


class SizeText:
    """Marks a setting that is read as a size (``Size``): its command-line option takes text."""


def _size_or_bytes(value: object) -> object:
    return parse_size(value) if isinstance(value, str) else value


Size = Annotated[int, SizeText(), BeforeValidator(_size_or_bytes), Field(ge=1, le=LARGEST)]
"""Bytes, given as a number of bytes or as Slurm's text (``300M``): text without a unit is MiB, so a
size handed on as text is written with its unit (``format_size``)."""


def is_size(field: FieldInfo) -> bool:
    """A ``Size`` setting, or an optional one (whose marks are inside the union)."""
    marks = list(field.metadata)
    for arg in get_args(field.annotation):
        marks += getattr(arg, "__metadata__", ())
    return any(isinstance(mark, SizeText) for mark in marks)
