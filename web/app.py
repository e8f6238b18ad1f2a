"""The HTTP side: the page, its event stream, the snapshot as JSON and /metrics (starlette on uvicorn).

Every path asks for the token (``?token=``, ``Authorization: Bearer``, or the
cookie a page opened with ``?token=`` gets), as Jupyter does: the page shows
who runs what, and loopback is every account's of the machine. Served on
loopback, a request must name a loopback host (``Host:``): a page of another
site whose name was made to point at 127.0.0.1 (DNS rebinding) is refused.
"""

import asyncio
import json
import os
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.middleware.base import BaseHTTPMiddleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from gangsched.client.master_client import MasterUnreachable
from gangsched.protocol.records import JobState
from gangsched.web.metrics import MasterCollector
from gangsched.web.watch import ClusterWatch

PAGE = Path(__file__).parent / "page"
COOKIE = "gang_web_token"
LOOPBACK = ("127.0.0.1", "localhost", "::1")


def create_app(watch: ClusterWatch, token: str, host: str, parent: int | None = None,
               stop: Callable[[], None] = lambda: None) -> Starlette:
    """``host``: the one it serves on; ``parent``: the master's pid, whose end ends this server."""
    collector = MasterCollector()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(collector)

    async def metrics(_: Request) -> Response:
        try:
            collector.reading = await watch.ask(lambda c: (
                c.stats(), c.matrix(), c.job_counts(), c.jobs(states=[JobState.RUNNING, JobState.SUSPENDED]),
                c.nodes(), c.reservations()))
        except MasterUnreachable as error:  # a standby master's (it answers not_leader), or one gone
            return Response(f"{error}\n", status_code=503, media_type="text/plain")
        return Response(generate_latest(registry), media_type=CONTENT_TYPE_LATEST)

    async def state(_: Request) -> Response:
        return JSONResponse(watch.snapshot)

    async def events(_: Request) -> Response:
        async def stream() -> AsyncIterator[str]:
            version = 0
            async with watch.watching():
                while True:
                    version = await watch.next_after(version)
                    yield f"data: {json.dumps(watch.snapshot)}\n\n"

        return StreamingResponse(stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache"})

    async def page(_: Request) -> Response:
        return FileResponse(PAGE / "index.html")

    @asynccontextmanager
    async def lifespan(_: Starlette) -> AsyncIterator[None]:
        tasks = [asyncio.create_task(watch.follow())]
        if parent is not None:
            tasks.append(asyncio.create_task(_end_with(parent, stop)))
        try:
            yield
        finally:
            for task in tasks:
                task.cancel()
            watch.close()

    app = Starlette(routes=[
        Route("/", page), Route("/metrics", metrics), Route("/api/state", state), Route("/events", events),
        Mount("/static", StaticFiles(directory=PAGE)),
    ], lifespan=lifespan)
    app.add_middleware(BaseHTTPMiddleware, dispatch=_token_check(token))
    if host in LOOPBACK:  # the outermost check: a rebound name is refused before the token is looked at
        app.add_middleware(TrustedHostMiddleware, allowed_hosts=["127.0.0.1", "localhost", "::1", "[::1]"])
    return app


def _token_check(token: str) -> Callable[[Request, Callable[[Request], Awaitable[Response]]], Awaitable[Response]]:
    async def dispatch(request: Request, call_next: Callable[[Request], Awaitable[Response]]) -> Response:
        given = request.query_params.get("token")
        header = request.headers.get("authorization", "")
        shown = given or header.removeprefix("Bearer ").strip() or request.cookies.get(COOKIE, "")
        if not secrets.compare_digest(shown.encode(), token.encode()):
            return PlainTextResponse("401: this page needs the token the master keeps in STATE_DIR/web-token "
                                     "(open it with ?token=... or send Authorization: Bearer ...)\n", 401)
        response = await call_next(request)
        if given:
            response.set_cookie(COOKIE, token, httponly=True, samesite="strict")
        return response

    return dispatch


async def _end_with(parent: int, stop: Callable[[], None]) -> None:
    while os.getppid() == parent:
        await asyncio.sleep(1.0)
    stop()
