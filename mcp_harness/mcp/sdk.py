"""Everything of mcp-harness that leans on the internals of the MCP SDK or of uvicorn, in one place.

The rest of the package uses their public API only. What is here was written against the versions in
`SDK_VERSIONS` and `UVICORN_VERSIONS`; `tests/test_sdk.py` fails outside them: then re-read each
function below against the new source (what it reaches into is named in its docstring) and widen the
range, or rewrite it. `pyproject.toml` caps both dependencies at the same first unchecked release, so
an install never meets a release nobody checked (`tests/test_sdk.py` holds the two equal).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, cast

from starlette.authentication import AuthenticationBackend
from starlette.middleware import Middleware
from starlette.middleware.authentication import AuthenticationMiddleware

if TYPE_CHECKING:
    from mcp.server.lowlevel.server import Server
    from mcp.server.mcpserver import MCPServer
    from mcp.shared._stream_protocols import ReadStream, WriteStream
    from mcp.shared.message import SessionMessage
    from starlette.applications import Starlette
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

#: the `mcp` releases this module was checked against: (lowest, first one not checked)
SDK_VERSIONS = ((2, 3), (2, 4))
#: the `uvicorn` releases `header_timeout_protocol` was checked against
UVICORN_VERSIONS = ((0, 30), (0, 56))


def lowlevel(server: MCPServer[Any]) -> Server[Any]:
    """The low-level server `MCPServer` wires (its handlers, middleware, lifespan). The SDK keeps it
    private (`_lowlevel_server`; its own in-memory client reads it) and serves it on stdio only through
    its own transport, which drops the answers of requests still running when stdin closes."""
    return server._lowlevel_server  # noqa: SLF001 - see the module docstring


async def serve_streams(
    server: MCPServer[Any], read_stream: ReadStream[SessionMessage | Exception], write_stream: WriteStream[Any]
) -> None:
    """Serve one connection of `server` over our own streams (`stdio.open_stdio`)."""
    inner = lowlevel(server)
    await inner.run(read_stream, write_stream, inner.create_initialization_options())


def on_authentication_error(app: Starlette, handler: Callable[..., Any]) -> None:
    """Give the SDK's `AuthenticationMiddleware` our error handler (the SDK builds it without one, and
    Starlette's default answers a backend's `AuthenticationError` with a 400). The app builds its
    middleware stack on the first request, from `app.user_middleware`."""
    for i, entry in enumerate(app.user_middleware):
        if entry.cls is cast(Any, AuthenticationMiddleware) and not entry.args and set(entry.kwargs) == {"backend"}:
            backend = cast(AuthenticationBackend, entry.kwargs["backend"])
            app.user_middleware[i] = Middleware(AuthenticationMiddleware, backend=backend, on_error=handler)
            return
    raise RuntimeError("the MCP SDK's HTTP app has no AuthenticationMiddleware to configure")


# -- unpaired surrogate escapes over HTTP --------------------------------------------------------


def lenient_tool_arguments(app: Starlette, path: str, mark: Callable[[Any], bool]) -> None:
    """Put `LenientJsonBody` in front of the MCP endpoint at `path`, inside the SDK's authentication
    (appended to the middleware the SDK put in `app.user_middleware`, so only authenticated requests
    are read ahead)."""
    from mcp.server.transport_security import DEFAULT_MAX_REQUEST_BODY_SIZE

    app.user_middleware.append(Middleware(LenientJsonBody, path=path, limit=DEFAULT_MAX_REQUEST_BODY_SIZE, mark=mark))


_SURROGATE_ESCAPE = re.compile(rb"\\u[dD][89a-fA-F]")


class LenientJsonBody:
    """ASGI middleware for the MCP endpoint: a body that is valid JSON text but holds an unpaired
    surrogate escape (`"\\ud8ac"`) in a tool call's argument reaches the tool as a marked argument
    (`arguments.mark_unpaired_surrogates`), which answers `[invalid_argument]` naming it. The SDK's
    streamable HTTP transport parses with `pydantic_core.from_json`, which refuses such text outright
    (a parse error for the whole request)."""

    def __init__(self, app: ASGIApp, *, path: str, limit: int, mark: Callable[[Any], bool]) -> None:
        self.app, self.path, self.limit, self.mark = app, path, limit, mark

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        authenticated = getattr(scope.get("user"), "is_authenticated", True)  # no user: no authentication
        if scope["type"] != "http" or scope["method"] != "POST" or scope["path"] != self.path or not authenticated:
            await self.app(scope, receive, send)
            return
        held: list[Message] = []
        size, more = 0, True
        while more and size <= self.limit:
            message = await receive()
            held.append(message)
            if message["type"] != "http.request":
                break
            size += len(message.get("body", b""))
            more = message.get("more_body", False)
        if not more and all(m["type"] == "http.request" for m in held):
            body = self.relieved(b"".join(m.get("body", b"") for m in held))
            if body is not None:
                held = [{"type": "http.request", "body": body, "more_body": False}]
                headers = [(k, v) for k, v in scope["headers"] if k != b"content-length"]
                scope = {**scope, "headers": [*headers, (b"content-length", str(len(body)).encode())]}

        async def replay() -> Message:
            return held.pop(0) if held else await receive()

        await self.app(scope, replay, send)

    def relieved(self, body: bytes) -> bytes | None:
        """The body with its unpaired surrogates marked, or None to pass it on as it came."""
        if _SURROGATE_ESCAPE.search(body) is None:
            return None
        try:
            value = json.loads(body)
        except (ValueError, RecursionError):
            return None
        if not self.mark(value):
            return None
        return json.dumps(value).encode()


# -- uvicorn ----------------------------------------------------------------------------------


def header_timeout_protocol(seconds: float) -> type[Any]:
    """uvicorn's HTTP/1.1 protocol with a deadline of `seconds` for each request's headers: it starts
    when the connection opens (and again when a response ends), and is lifted once the headers are in.
    Reaches into `H11Protocol`'s `conn`, `transport`, `loop`, `on_response_complete` and
    `timeout_keep_alive_handler` (uvicorn has no public hook for this). Built on demand: only the HTTP
    server needs h11."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class HeaderTimeoutProtocol(H11Protocol):
        header_timeout = seconds

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            self._header_timer: asyncio.TimerHandle | None = None
            super().connection_made(transport)
            self._arm_header_timer()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            if self.conn.their_state is not h11.IDLE:  # the request's headers have all arrived
                self._cancel_header_timer()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if self.conn.their_state is h11.IDLE and not self.transport.is_closing():
                self._arm_header_timer()  # the next request on this connection gets its own deadline

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_header_timer()
            super().connection_lost(exc)

        def _arm_header_timer(self) -> None:
            self._cancel_header_timer()
            self._header_timer = self.loop.call_later(self.header_timeout, self._headers_too_slow)

        def _cancel_header_timer(self) -> None:
            if self._header_timer is not None:
                self._header_timer.cancel()
                self._header_timer = None

        def _headers_too_slow(self) -> None:
            self._header_timer = None
            if self.conn.their_state is h11.IDLE:
                self.timeout_keep_alive_handler()  # uvicorn's own way to close a connection with no request

    return HeaderTimeoutProtocol


def checked_against() -> Iterable[tuple[str, tuple[int, int], tuple[int, int]]]:
    """(distribution, lowest version, first version not checked) for `tests/test_sdk.py`."""
    yield "mcp", *SDK_VERSIONS
    yield "uvicorn", *UVICORN_VERSIONS
