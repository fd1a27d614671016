"""Live parts rendered once for every open tab: on each change every open page re-fetches its live part,
and ten tabs of a board asked the server for ten renders of the same HTML (each a render in a
worker thread, sharing the interpreter lock with the event loop that answers the agents). A live part is
rendered once per (workspace, change-feed version, URL, the session values a template shows: name, role,
CSRF token) and the same bytes go to every tab asking for that version; tabs asking at once wait for
the one render. Parts live `TTL_SECONDS` at most (a page also shows the clock: leases running out), a
few at a time (least recently used out first)."""

from __future__ import annotations

import time
import weakref
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Hashable
from dataclasses import dataclass, field
from functools import wraps

import anyio
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from mcp_harness.console.app import Console, Handler, Page

TTL_SECONDS = 2.0  #: a part is served this long at most, even if nothing changes (a page shows the clock)
SIZE = 64  #: parts kept at once per console


@dataclass
class _Part:
    at: float
    ready: anyio.Event = field(default_factory=anyio.Event)
    body: bytes | None = None  #: None while rendering, and when the render did not give a 200 page


class LiveParts:
    """The rendered live parts of one console; `renders` counts the renders (for tests and benchmarks)."""

    def __init__(self, size: int = SIZE, ttl: float = TTL_SECONDS) -> None:
        self.size, self.ttl = size, ttl
        self.renders = 0
        self._parts: OrderedDict[Hashable, _Part] = OrderedDict()

    async def get(self, key: Hashable, render: Callable[[], Awaitable[Response]]) -> Response:
        """The part of `key`: rendered now, or the bytes a render of the same key gave (or is giving)."""
        at = time.monotonic()
        part = self._parts.get(key)
        if part is not None and at - part.at <= self.ttl:
            self._parts.move_to_end(key)
            await part.ready.wait()
            if part.body is not None:
                return _html(part.body)
            return await render()  # that render failed or was no page: this request renders its own
        part = self._parts[key] = _Part(at)
        while len(self._parts) > self.size:
            self._parts.popitem(last=False)
        try:
            self.renders += 1
            response = await render()
            if isinstance(response, Page) and response.status_code == 200:
                await response.finish()
                part.body = bytes(response.body)
            return response
        finally:
            part.ready.set()
            if part.body is None and self._parts.get(key) is part:
                del self._parts[key]


#: each console's parts
_parts: weakref.WeakKeyDictionary[Console, LiveParts] = weakref.WeakKeyDictionary()


def parts_of(console: Console) -> LiveParts:
    return _parts.setdefault(console, LiveParts())


def _html(body: bytes) -> HTMLResponse:
    return HTMLResponse(body, headers={"cache-control": "no-store"})


def shared(fn: Handler) -> Handler:
    """A view whose live part (htmx's `HX-Request`) is shared by every tab at the same version (see the
    module docstring); the full page is rendered for each request, as before. Under `page`."""

    @wraps(fn)
    async def handle(console: Console, request: Request) -> Response:
        if not request.headers.get("hx-request"):
            return await fn(console, request)
        session, ident = await console.viewer(request)  # signed in and allowed: checked for every tab
        # the version first: what is rendered after it is at least as new as the key says
        version = console.harness.console.changes.version_of(ident.workspace)
        key = (
            ident.workspace,
            version,
            request.url.path,
            request.url.query,
            request.headers.get("hx-target"),
            session.agent,
            session.role,
            session.workspace,
            session.csrf,
        )
        return await parts_of(console).get(key, lambda: fn(console, request))

    return handle
