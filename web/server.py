"""uvicorn's server with a loop that sleeps until it should end.

uvicorn's own loop wakes every 0.1 s to see whether it should end and to date
its responses: ten wake-ups a second, each on a core the jobs keep busy and with
its caches cold, some 0.2 % of a core in this process while nobody looks. This
one wakes once a second (the resolution of the Date header) or as soon as it
is told to end, by a signal or by ``end``.
"""

import asyncio
import contextlib
from collections.abc import Callable
from types import FrameType

import uvicorn

_TICK_S = 1.0


class ViewServer(uvicorn.Server):
    def __init__(self, config: uvicorn.Config, bound: Callable[[str], None] | None = None) -> None:
        """``bound``: told the HOST:PORT the server listens on, once it does (a port 0 asked for any)."""
        super().__init__(config)
        self._ending = asyncio.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._bound = bound

    def end(self) -> None:
        """From the server's event loop: end as a SIGTERM would."""
        self.should_exit = True
        self._ending.set()

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        super().handle_exit(sig, frame)
        if self._loop is not None:  # a signal handler runs between the loop's steps: wake its wait
            self._loop.call_soon_threadsafe(self._ending.set)

    async def main_loop(self) -> None:
        self._loop = asyncio.get_running_loop()
        if self._bound is not None:
            host, port = self.servers[0].sockets[0].getsockname()[:2]
            self._bound(f"[{host}]:{port}" if ":" in host else f"{host}:{port}")
        # on_tick with counter 0 dates the responses, checks the request limit and says whether to end
        while not await self.on_tick(0):
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ending.wait(), _TICK_S)
