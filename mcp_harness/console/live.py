"""Server-sent events: an open page hears "change" when any process commits in its workspace, and
htmx re-fetches the page's live part. However many pages are open, the process has one change feed;
each page's stream only waits on it.

A stream belongs to its sign-in: it ends within a second of signing out or of the token's revocation
(the session is looked up again while the stream waits), and one sign-in holds at most
`max_streams_per_token` streams at once in a server process (more are answered 429), so one token
cannot starve the others."""

from __future__ import annotations

import weakref
from collections import Counter
from collections.abc import AsyncIterator

import anyio
from sse_starlette import EventSourceResponse
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from mcp_harness.console.app import Console, page

QUIET_SECONDS = 0.25  #: after a change, wait this long so a burst of commits makes one refresh
WAIT_SECONDS = 0.5  #: how long one wait on the feed lasts before the session is looked up again
STOP_GRACE_SECONDS = 0.5  #: on shutdown, how long a stream has to end by itself (less than uvicorn's grace)

#: open streams per console, per sign-in key (the token's hash; a `ui` session's id)
_open: weakref.WeakKeyDictionary[Console, Counter[str]] = weakref.WeakKeyDictionary()


@page
async def events(console: Console, request: Request) -> Response:
    session, ident = await console.viewer(request)  # signed in, and allowed to see the workspace
    limit = console.harness.settings.max_streams_per_token
    counts = _open.setdefault(console, Counter())
    if counts[session.key] >= limit:
        return PlainTextResponse(
            f"this sign-in already has {limit} live views open (MCP_HARNESS_MAX_STREAMS_PER_TOKEN); close some "
            "console tabs and reload",
            status_code=429,
            headers={"retry-after": "30", "cache-control": "no-store"},
        )
    counts[session.key] += 1
    feed = console.harness.console.changes
    workspace = ident.workspace

    stopping = anyio.Event()  #: set when the server shuts down (Ctrl-C): the stream then ends cleanly

    async def wait(seen: int) -> int:
        """The workspace's next version, or `seen` when the server is stopping or the wait times out."""
        version = seen
        async with anyio.create_task_group() as tg:

            async def on_change() -> None:
                nonlocal version
                version = await feed.wait(seen, WAIT_SECONDS, workspace=workspace)
                tg.cancel_scope.cancel()

            async def on_stop() -> None:
                await stopping.wait()
                tg.cancel_scope.cancel()

            tg.start_soon(on_change)
            tg.start_soon(on_stop)
        return version

    async def stream() -> AsyncIterator[dict[str, str]]:
        version = feed.version_of(workspace)
        # Whatever changed between rendering the page and this stream opening is not missed.
        yield {"event": "change", "data": str(version)}
        while not stopping.is_set() and await console.login.alive(session):
            seen = version
            version = await wait(seen)
            if version != seen:
                await anyio.sleep(QUIET_SECONDS)
                version = feed.version_of(workspace)
                yield {"event": "change", "data": str(version)}

    # On shutdown the generator returns within the grace period, so the response is completed (the
    # browser reconnects later) instead of cut off, which uvicorn would log as an ERROR.
    return _CountedStream(
        counts,
        session.key,
        stream(),
        ping=15,
        headers={"cache-control": "no-store"},
        shutdown_event=stopping,
        shutdown_grace_period=STOP_GRACE_SECONDS,
    )


class _CountedStream(EventSourceResponse):
    """An event stream that gives its place back however it ends (also when it never started)."""

    def __init__(
        self,
        counts: Counter[str],
        key: str,
        content: AsyncIterator[dict[str, str]],
        *,
        ping: int,
        headers: dict[str, str],
        shutdown_event: anyio.Event,
        shutdown_grace_period: float,
    ) -> None:
        super().__init__(
            content,
            ping=ping,
            headers=headers,
            shutdown_event=shutdown_event,
            shutdown_grace_period=shutdown_grace_period,
        )
        self.counts, self.key = counts, key

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self.counts[self.key] -= 1
            if self.counts[self.key] <= 0:
                del self.counts[self.key]
