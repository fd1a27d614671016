"""Defences of the HTTP server against connections that hold resources without making requests.

uvicorn closes a keep-alive connection that goes idle after a response, but not one that never
finishes (or never starts) its request headers: each such connection keeps a file descriptor for
as long as its client likes, and once the process runs out of descriptors nobody else gets in.
So: every connection gets `header_timeout` seconds to send its request line and headers; the
open-files limit is raised to what the system allows; and the event loop's complaint about a full
descriptor table (asyncio logs one with a traceback per failed accept, thousands a second) is
logged at most once a minute. A server reachable from untrusted networks still belongs behind a
reverse proxy that buffers requests (see the README).
"""

from __future__ import annotations

import asyncio
import logging
import resource
import time
from typing import Any

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

log = logging.getLogger("mcp_harness.http")

ACCEPT_ERROR = "socket.accept() out of system resource"
ACCEPT_LOG_INTERVAL_SECONDS = 60.0


class HeaderTimeoutProtocol(H11Protocol):
    """uvicorn's HTTP/1.1 protocol with a deadline for each request's headers: it starts when the
    connection opens (and again when a response ends), and is lifted once the headers are in."""

    header_timeout = 10.0  #: set per server by `protocol_with_header_timeout`

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


def protocol_with_header_timeout(seconds: float) -> type[HeaderTimeoutProtocol]:
    return type("HeaderTimeoutProtocol", (HeaderTimeoutProtocol,), {"header_timeout": seconds})


def raise_open_files_limit() -> None:
    """Raise the soft limit on open files to the hard one: a soft limit of 256 or 1,024 (common
    defaults for services) is a few hundred idle connections away from refusing everyone."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard != resource.RLIM_INFINITY and soft >= hard:
        return
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    except (ValueError, OSError) as exc:  # e.g. macOS refuses RLIM_INFINITY: keep what we have
        log.info("open-files limit left at %s: %s", soft, exc)


def quiet_accept_errors(loop: asyncio.AbstractEventLoop) -> None:
    """Log "cannot accept" at most once per `ACCEPT_LOG_INTERVAL_SECONDS`, in one line, with how
    many were left out; every other loop error is handled as before."""
    previous = loop.get_exception_handler()
    state = {"last": float("-inf"), "skipped": 0}

    def handler(loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") != ACCEPT_ERROR:
            if previous is not None:
                previous(loop, context)
            else:
                loop.default_exception_handler(context)
            return
        now = time.monotonic()
        if now - state["last"] < ACCEPT_LOG_INTERVAL_SECONDS:
            state["skipped"] += 1
            return
        exc = context.get("exception")
        more = f" ({state['skipped']} more since the last report)" if state["skipped"] else ""
        log.error("cannot accept new connections: %s; connections that never finish a request hold the "
                  "descriptors until the header timeout closes them%s", exc, more)  # fmt: skip
        state["last"], state["skipped"] = now, 0

    loop.set_exception_handler(handler)
