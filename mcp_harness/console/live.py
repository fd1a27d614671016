"""Server-sent events: an open page hears "change" when any process commits, and htmx re-fetches
the page's live part. However many pages are open, the process has one change feed; each page's
stream only waits on it."""

from __future__ import annotations

from collections.abc import AsyncIterator

import anyio
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import Response

from .app import Console, page

QUIET_SECONDS = 0.25  #: after a change, wait this long so a burst of commits makes one refresh
WAIT_SECONDS = 30.0  #: how long one wait on the feed lasts (keep-alive pings are sent meanwhile)
STOP_GRACE_SECONDS = 0.5  #: on shutdown, how long a stream has to end by itself (less than uvicorn's grace)


@page
async def events(console: Console, request: Request) -> Response:
    await console.viewer(request)  # signed in, and allowed to see the workspace
    feed = console.harness.console.changes

    stopping = anyio.Event()  #: set when the server shuts down (Ctrl-C): the stream then ends cleanly

    async def wait(seen: int) -> int:
        """The feed's next version, or `seen` when the server is stopping first."""
        version = seen
        async with anyio.create_task_group() as tg:

            async def on_change() -> None:
                nonlocal version
                version = await feed.wait(seen, WAIT_SECONDS)
                tg.cancel_scope.cancel()

            async def on_stop() -> None:
                await stopping.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(on_change)
            tg.start_soon(on_stop)
        return version

    async def stream() -> AsyncIterator[dict[str, str]]:
        version = feed.version
        # Whatever changed between rendering the page and this stream opening is not missed.
        yield {"event": "change", "data": str(version)}
        while not stopping.is_set():
            seen = version
            version = await wait(seen)
            if version != seen:
                await anyio.sleep(QUIET_SECONDS)
                version = feed.version
                yield {"event": "change", "data": str(version)}

    # On shutdown the generator returns within the grace period, so the response is completed (the
    # browser reconnects later) instead of cut off, which uvicorn would log as an ERROR.
    return EventSourceResponse(stream(), ping=15, headers={"cache-control": "no-store"}, shutdown_event=stopping,
                               shutdown_grace_period=STOP_GRACE_SECONDS)  # fmt: skip
