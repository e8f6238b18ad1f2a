"""Memory sizes on the command line, as sbatch reads them (protocol/sizes.py); a module of its own, so
that `gang submit` loads no more than it needs."""

from typing import Any

import click

from gangsched.protocol.sizes import SizeError, parse_size


class SizeType(click.ParamType):  # type: ignore[type-arg]  # generic only in type stubs
    """Bytes, or one line that says what is wrong."""

    name = "size"

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> int:
        if isinstance(value, int):
            return value
        try:
            return parse_size(value)
        except SizeError as error:
            self.fail(str(error), param, ctx)


SIZE = SizeType()
