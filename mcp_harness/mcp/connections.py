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

log = logging.getLogger("mcp_harness.mcp.http")

ACCEPT_ERROR = "socket.accept() out of system resource"
ACCEPT_LOG_INTERVAL_SECONDS = 60.0


def protocol_with_header_timeout(seconds: float) -> type[Any]:
    """uvicorn's HTTP/1.1 protocol with a `seconds` deadline for each request's headers (`sdk`: it
    reaches into uvicorn's internals)."""
    from mcp_harness.mcp.sdk import header_timeout_protocol

    return header_timeout_protocol(seconds)


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
        log.error(
            "cannot accept new connections: %s; connections that never finish a request hold the "
            "descriptors until the header timeout closes them%s",
            exc,
            more,
        )
        state["last"], state["skipped"] = now, 0

    loop.set_exception_handler(handler)
