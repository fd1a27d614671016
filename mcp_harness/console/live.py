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


@page
async def events(console: Console, request: Request) -> Response:
    await console.viewer(request)  # signed in, and allowed to see the workspace
    feed = console.harness.console.changes

    async def stream() -> AsyncIterator[dict[str, str]]:
        version = feed.version
        # Whatever changed between rendering the page and this stream opening is not missed.
        yield {"event": "change", "data": str(version)}
        while True:
            seen = version
            version = await feed.wait(seen, WAIT_SECONDS)
            if version != seen:
                await anyio.sleep(QUIET_SECONDS)
                version = feed.version
                yield {"event": "change", "data": str(version)}

    return EventSourceResponse(stream(), ping=15, headers={"cache-control": "no-store"})
