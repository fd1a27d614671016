"""The stdio transport on the event loop itself, for when stdin and stdout are pipes or sockets.

The SDK's stdio transport reads and writes through worker threads (`anyio.wrap_file`): every message
in costs one thread hand-off and every message out two (write, flush), each a wake-up of another
thread. When an MCP client starts the server, as clients do, stdin and stdout are pipes, and asyncio
can wait on them directly: this transport does, and answers a tool call about a millisecond sooner
on a small machine. Anything else (a terminal, a file, Windows) uses the SDK's transport unchanged,
as does `MCP_HARNESS_STDIO_TRANSPORT=sdk`.

The pipes' asyncio protocols are themselves the read and write streams the SDK's session takes (its
`ReadStream` / `WriteStream` protocols): a message read wakes the session's own task, and a message
sent is written by the task that sends it, with no task in between.

Like the SDK's, it keeps stray output off the wire while it serves: fd 0 reads the null device and
fd 1 writes to stderr, and both are restored when it ends.
"""

from __future__ import annotations

import asyncio
import logging
import os
import stat
import sys
from collections import deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any

import anyio
import mcp_types
from mcp.shared.message import SessionMessage

from .config import ENV_PREFIX
from .errors import InvalidArgument

log = logging.getLogger("mcp_harness.stdio")

#: A message longer than this is dropped (and logged) instead of being buffered without bound.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Lines read ahead of the server before stdin is left unread for a while.
MAX_WAITING_LINES = 64
#: How long the last answers may take to reach a client that stopped reading, on the way out.
CLOSE_TIMEOUT_SECONDS = 5.0


def loop_transport_usable() -> bool:
    """True when this transport should serve: stdin and stdout are pipes or sockets that asyncio can
    wait on (POSIX only), and `MCP_HARNESS_STDIO_TRANSPORT` is `auto` (default), not `sdk`."""
    choice = os.environ.get(ENV_PREFIX + "STDIO_TRANSPORT", "auto").strip().lower()
    if choice not in ("auto", "sdk"):
        raise InvalidArgument(f"{ENV_PREFIX}STDIO_TRANSPORT is {choice!r}; allowed: auto, sdk")
    if choice == "sdk" or sys.platform == "win32":
        return False
    try:
        modes = [os.fstat(fd).st_mode for fd in (0, 1)]
    except OSError:
        return False
    return all(stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) for mode in modes)


class StdinStream(asyncio.Protocol):
    """stdin as the session's read stream: splits the bytes into lines, parses each as a JSON-RPC
    message (a line that is not one is handed on as the exception, as the SDK's transport does), drops
    a line over the limit whole (logged), and stops reading while many lines wait."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._partial = bytearray()
        self._discarding = False  # inside a line that went over the limit: skip to its end
        self._lines: deque[bytes] = deque()
        self._more = asyncio.Event()
        self._eof = False
        self._transport: asyncio.ReadTransport | None = None
        self._paused = False

    # -- asyncio protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end], line_ends=True)
            start = end + 1
        self._take(data[start:], line_ends=False)
        if self._lines:
            self._more.set()
            if len(self._lines) > MAX_WAITING_LINES and not self._paused and self._transport is not None:
                self._paused = True
                self._transport.pause_reading()

    def _take(self, piece: bytes, *, line_ends: bool) -> None:
        if not self._discarding and len(self._partial) + len(piece) > self._limit:
            log.error("dropped an incoming message longer than %d bytes", self._limit)
            self._discarding = True
            self._partial.clear()
        if not self._discarding:
            self._partial += piece
        if line_ends:
            if not self._discarding and self._partial.strip():
                self._lines.append(bytes(self._partial))
            self._partial.clear()
            self._discarding = False

    def eof_received(self) -> bool:
        self.connection_lost(None)
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        if not self._eof and self._partial.strip() and not self._discarding:
            self._lines.append(bytes(self._partial))  # a last message without its newline
        self._eof = True
        self._more.set()

    # -- the SDK's ReadStream ---------------------------------------------------------------------

    async def receive(self) -> SessionMessage | Exception:
        while not self._lines:
            if self._eof:
                raise anyio.EndOfStream
            self._more.clear()
            await self._more.wait()
        if self._paused and len(self._lines) <= MAX_WAITING_LINES // 2 and self._transport is not None:
            self._paused = False
            self._transport.resume_reading()
        line = self._lines.popleft()
        try:
            text = line.decode("utf-8", errors="replace")
            return SessionMessage(mcp_types.jsonrpc_message_adapter.validate_json(text, by_name=False))
        except Exception as exc:  # noqa: BLE001 - the session logs it and reads on
            return exc

    def __aiter__(self) -> StdinStream:
        return self

    async def __anext__(self) -> SessionMessage | Exception:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        if self._transport is not None:
            self._transport.close()

    async def __aenter__(self) -> StdinStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


class StdoutStream(asyncio.Protocol):
    """stdout as the session's write stream: each message is written as it is sent, one line each
    (asyncio keeps the order of writes), waiting only while the pipe is full."""

    def __init__(self) -> None:
        self._transport: asyncio.WriteTransport | None = None
        self._paused = False
        self._waiter: asyncio.Future[None] | None = None
        self._lost: BaseException | None = None
        self._closed = False
        self._warned = False
        self.gone = asyncio.Event()  #: set when the pipe is closed (by either end)

    # -- asyncio protocol -------------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = transport  # type: ignore[assignment]

    def pause_writing(self) -> None:
        self._paused = True

    def resume_writing(self) -> None:
        self._paused = False
        self._wake()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._lost = exc or BrokenPipeError("stdout was closed")
        self.gone.set()
        self._wake()

    def _wake(self) -> None:
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)

    # -- the SDK's WriteStream --------------------------------------------------------------------

    async def send(self, item: SessionMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._lost is not None or self._transport is None or self._transport.is_closing():
            raise self._broken()
        data = item.message.model_dump_json(by_alias=True, exclude_unset=True)
        self._transport.write(data.encode() + b"\n")
        while self._paused and self._lost is None:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        if self._lost is not None:
            raise self._broken()

    def _broken(self) -> anyio.BrokenResourceError:
        if not self._warned:
            self._warned = True
            log.warning(
                "the client stopped reading stdout (%s); answers are dropped until stdin ends",
                self._lost or "the pipe is closing",
            )
        return anyio.BrokenResourceError()

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> StdoutStream:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


def _claim(fd: int, diversion: int) -> int:
    """A private duplicate of `fd` (the wire) and `fd` pointed at `diversion`."""
    import fcntl

    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(diversion, fd)
    return private


@asynccontextmanager
async def pipe_stdio() -> AsyncIterator[tuple[StdinStream, StdoutStream]]:
    """(read stream, write stream) of MCP messages over the process's stdin and stdout."""
    loop = asyncio.get_running_loop()
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        wire_in = _claim(0, devnull)
    finally:
        os.close(devnull)
    wire_out = _claim(1, 2)
    blocking = os.get_blocking(wire_in), os.get_blocking(wire_out)
    in_transport = out_transport = None
    try:  # from here on, whatever fails, fd 0 and fd 1 get the wire back
        in_transport, stdin = await loop.connect_read_pipe(
            lambda: StdinStream(MAX_MESSAGE_BYTES), os.fdopen(wire_in, "rb", buffering=0, closefd=False)
        )
        out_transport, stdout = await loop.connect_write_pipe(
            StdoutStream, os.fdopen(wire_out, "wb", buffering=0, closefd=False)
        )
        yield stdin, stdout
    finally:
        if in_transport is not None:
            in_transport.close()
        if out_transport is not None:
            out_transport.close()  # writes out what it still holds, then reports the connection lost
            with anyio.move_on_after(CLOSE_TIMEOUT_SECONDS, shield=True):
                await stdout.gone.wait()
        sys.stdout.flush()  # anything printed while serving belongs to stderr, not the wire
        for fd, private, was_blocking in ((0, wire_in, blocking[0]), (1, wire_out, blocking[1])):
            with suppress(OSError):
                os.set_blocking(private, was_blocking)
                os.dup2(private, fd)
            with suppress(OSError):
                os.close(private)
