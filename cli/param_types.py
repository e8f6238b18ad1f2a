"""Click's types for values the one grammars read (protocol/sizes.py, durations.py, times.py): memory sizes,
lengths and points in time, each read by its grammar's function or refused in that function's one line; a
module of its own, so that `gang submit` loads no more than it needs."""

from collections.abc import Callable
from typing import Any

import click

from gangsched.protocol.sizes import parse_size


class ReadType(click.ParamType):  # type: ignore[type-arg]  # generic only in type stubs
    """A value as ``read`` reads its text (a value already of ``kind`` as it is), or one line that says what
    is wrong: ``read``'s ValueError."""

    def __init__(self, name: str, read: Callable[[str], Any], kind: type) -> None:
        self.name, self._read, self._kind = name, read, kind

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, self._kind):
            return value
        try:
            return self._read(str(value))
        except ValueError as error:
            self.fail(str(error), param, ctx)


SIZE = ReadType("size", parse_size, int)  # bytes
