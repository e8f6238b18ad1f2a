"""A daemon with a fault injected: ``python -m tests.faulty MODULE:CLASS.METHOD CALLS -- ARGS``
runs ``gang ARGS`` with CLASS.METHOD raising RuntimeError on the listed calls (``5,6,7``)
and working on all the others: how a test shows a daemon's loop outlives a failing step."""

import importlib
import sys
from typing import Any

from gangsched.cli.main import main


def inject(target: str, calls: set[int]) -> None:
    module, _, attribute = target.partition(":")
    owner_name, _, method = attribute.partition(".")
    owner = getattr(importlib.import_module(module), owner_name)
    original = getattr(owner, method)
    count = 0

    def failing(self: object, *args: Any, **kwargs: Any) -> Any:
        nonlocal count
        count += 1
        if count in calls:
            raise RuntimeError(f"injected fault: {attribute}, call {count}")
        return original(self, *args, **kwargs)

    setattr(owner, method, failing)


if __name__ == "__main__":
    target, calls, separator, *arguments = sys.argv[1:]
    assert separator == "--", "usage: python -m tests.faulty MODULE:CLASS.METHOD CALLS -- ARGS"
    inject(target, {int(call) for call in calls.split(",")})
    sys.argv = ["gang", *arguments]
    main()
