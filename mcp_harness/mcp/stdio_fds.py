"""The process's stdin and stdout as asyncio transports, whatever they are.

Pipes and stream sockets, how MCP clients start servers (Python clients give pipes, Node clients a
socket pair per stream, socat and inetd one socket for both), are waited on by the event loop itself.
Anything else (a terminal, a regular file, /dev/null) is read and written by a thread of its own:
asyncio cannot wait on a regular file, and making a terminal non-blocking would change it for the shell
that shares it. Either way the same protocol object, `Ends`, receives the bytes and the flow control.

While serving, fd 0 reads the null device and fd 1 writes to stderr, so stray output (a print, a child
process) cannot corrupt the wire; both get the wire back on the way out.
"""

from __future__ import annotations

import asyncio
import os
import queue
import select
import socket
import stat
import sys
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from typing import Any, Protocol

import anyio

from mcp_harness.errors import InvalidArgument

CHUNK = 256 * 1024  #: bytes a thread reads at once
HIGH_WATER, LOW_WATER = 64 * 1024, 16 * 1024  #: a thread writer pauses its protocol between these, as asyncio's do


class Reader(Protocol):
    def attach(self, transport: Any) -> None: ...
    def feed(self, data: bytes) -> None: ...
    def feed_eof(self) -> None: ...


class Writer(Protocol):
    def attach(self, transport: Any) -> None: ...
    def pause(self) -> None: ...
    def resume(self) -> None: ...
    def lost(self, exc: BaseException | None) -> None: ...
    def ended(self, unsent: int) -> None: ...


class Ends(asyncio.Protocol):
    """One transport's events, routed to the message reader (stdin), the writer (stdout), or both (a
    single socket serving both directions)."""

    def __init__(self, reader: Reader | None, writer: Writer | None) -> None:
        self.reader, self.writer = reader, writer

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        for end in (self.reader, self.writer):
            if end is not None:
                end.attach(transport)

    def data_received(self, data: bytes) -> None:
        if self.reader is not None:  # bytes arriving on an output-only socket are ignored
            self.reader.feed(data)

    def eof_received(self) -> bool:
        if self.reader is not None:
            self.reader.feed_eof()
        return self.writer is not None  # a client that half-closed its socket still reads the answers

    def pause_writing(self) -> None:
        if self.writer is not None:
            self.writer.pause()

    def resume_writing(self) -> None:
        if self.writer is not None:
            self.writer.resume()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.reader is not None:
            self.reader.feed_eof()
        if self.writer is not None:
            self.writer.lost(exc)


class ThreadReader(asyncio.ReadTransport):
    """A read transport over a blocking fd: a daemon thread reads one chunk at a time and the loop hands
    it to the protocol, so no more than one chunk waits and pausing stops the reads."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, protocol: Ends) -> None:
        super().__init__()
        self._loop, self._fd, self._protocol = loop, fd, protocol
        self._turn = threading.Event()  # set: the thread may read the next chunk
        self._paused = self._closing = False
        protocol.connection_made(self)
        self._turn.set()
        threading.Thread(target=self._run, name="mcp-harness-stdin", daemon=True).start()

    def _run(self) -> None:
        while True:
            self._turn.wait()
            self._turn.clear()
            if self._closing:
                return
            try:
                data = os.read(self._fd, CHUNK)
            except BlockingIOError:  # someone made the file non-blocking: wait until it has data
                select.select([self._fd], [], [])
                self._turn.set()
                continue
            except OSError:  # EIO: the terminal hung up; any read error ends the input
                data = b""
            try:
                self._loop.call_soon_threadsafe(self._deliver, data)
            except RuntimeError:  # the loop has closed
                return
            if not data:
                return

    def _deliver(self, data: bytes) -> None:
        if self._closing:
            return
        if not data:
            self._closing = True
            self._protocol.eof_received()
            self._protocol.connection_lost(None)
            return
        self._protocol.data_received(data)
        if not self._paused:
            self._turn.set()

    def pause_reading(self) -> None:
        self._paused = True

    def resume_reading(self) -> None:
        if self._paused:
            self._paused = False
            self._turn.set()

    def is_closing(self) -> bool:
        return self._closing

    def close(self) -> None:
        self._closing = True
        self._turn.set()


class ThreadWriter(asyncio.WriteTransport):
    """A write transport over a blocking fd: writes are queued in order for a daemon thread, and the
    protocol is paused while more than `HIGH_WATER` bytes wait (a terminal nobody reads)."""

    def __init__(self, loop: asyncio.AbstractEventLoop, fd: int, protocol: Ends) -> None:
        super().__init__()
        self._loop, self._fd, self._protocol = loop, fd, protocol
        self._queue: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        self._waiting = 0  # bytes queued and not yet written
        self._paused = self._closing = self._lost = False
        protocol.connection_made(self)
        threading.Thread(target=self._run, name="mcp-harness-stdout", daemon=True).start()

    def write(self, data: bytes | bytearray | memoryview) -> None:
        if self._closing:
            return
        data = bytes(data)  # a copy of a buffer the caller may reuse (a bytes object is itself)
        self._waiting += len(data)
        self._queue.put(data)
        if not self._paused and self._waiting > HIGH_WATER:
            self._paused = True
            self._protocol.pause_writing()

    def _run(self) -> None:
        error: OSError | None = None
        while (data := self._queue.get()) is not None:
            if error is None:
                try:
                    _write_all(self._fd, data)
                except OSError as exc:  # EPIPE, or EIO from a terminal that hung up
                    error = exc
            if not self._report(self._written, len(data), error):
                return
        self._report(self._finished, error)

    def _report(self, callback: Any, *args: Any) -> bool:
        try:
            self._loop.call_soon_threadsafe(callback, *args)
        except RuntimeError:  # the loop has closed
            return False
        return True

    def _written(self, size: int, error: OSError | None) -> None:
        self._waiting -= size
        if error is not None:
            self._finished(error)
        elif self._paused and self._waiting <= LOW_WATER:
            self._paused = False
            self._protocol.resume_writing()

    def _finished(self, error: OSError | None) -> None:
        if not self._lost:
            self._lost = self._closing = True
            self._protocol.connection_lost(error)

    def is_closing(self) -> bool:
        return self._closing

    def get_write_buffer_size(self) -> int:
        return self._waiting

    def close(self) -> None:
        """Write what is queued, then report the connection lost."""
        if not self._closing:
            self._closing = True
            self._queue.put(None)

    def abort(self) -> None:
        """Nothing to cut short: the thread may be blocked in a write nobody reads, and ends with the process."""


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


def check_open() -> None:
    """Refuse to serve when stdin or stdout is closed: checked before the event loop starts, whose own
    descriptors would otherwise take their numbers."""
    for fd, name in ((0, "stdin"), (1, "stdout")):
        try:
            os.fstat(fd)
        except OSError:
            raise InvalidArgument(f"{name} is closed; start the server from an MCP client (or a shell)") from None


def _kind(fd: int) -> str:
    """`pipe` or `socket` for what the event loop can wait on, else `thread`."""
    mode = os.fstat(fd).st_mode
    if sys.platform == "win32":
        return "thread"
    if stat.S_ISFIFO(mode):
        return "pipe"
    if stat.S_ISSOCK(mode):
        with socket.socket(fileno=os.dup(fd)) as sock:
            return "socket" if sock.type == socket.SOCK_STREAM else "thread"
    return "thread"


def _same_file(a: int, b: int) -> bool:
    first, second = os.fstat(a), os.fstat(b)
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def _claim(fd: int, diversion: int) -> int:
    """A private duplicate of `fd` (the wire), and `fd` pointed at `diversion`."""
    if sys.platform == "win32":
        private = os.dup(fd)
    else:
        import fcntl

        private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(diversion, fd)
    return private


async def _connect(
    loop: asyncio.AbstractEventLoop, kinds: tuple[str, str], fds: tuple[int, int], reader: Reader, writer: Writer
) -> tuple[Any, Any]:
    """(input transport, output transport); the same transport twice for one socket on both fds."""
    if kinds == ("socket", "socket") and _same_file(*fds):
        both = socket.socket(fileno=os.dup(fds[0]))
        transport, _ = await loop.connect_accepted_socket(lambda: Ends(reader, writer), both)
        return transport, transport
    reading = await _connect_one(loop, kinds[0], fds[0], Ends(reader, None))
    try:
        return reading, await _connect_one(loop, kinds[1], fds[1], Ends(None, writer))
    except BaseException:
        reading.close()
        raise


async def _connect_one(loop: asyncio.AbstractEventLoop, kind: str, fd: int, protocol: Ends) -> Any:
    reads = protocol.reader is not None
    transport: Any
    if kind == "socket":
        transport, _ = await loop.connect_accepted_socket(lambda: protocol, socket.socket(fileno=os.dup(fd)))
    elif kind == "pipe" and reads:
        transport, _ = await loop.connect_read_pipe(lambda: protocol, os.fdopen(fd, "rb", 0, closefd=False))
    elif kind == "pipe":
        transport, _ = await loop.connect_write_pipe(lambda: protocol, os.fdopen(fd, "wb", 0, closefd=False))
    else:
        transport = (ThreadReader if reads else ThreadWriter)(loop, fd, protocol)
    return transport


@asynccontextmanager
async def wired(reader: Reader, writer: Writer, gone: asyncio.Event, close_timeout: float) -> AsyncIterator[None]:
    """Serve `reader` from stdin and `writer` to stdout until the block ends; then stop reading, let the
    output drain (up to `close_timeout` seconds, until `gone` is set), tell the writer how many bytes
    were not taken (`Writer.ended`) and give the fds back."""
    loop = asyncio.get_running_loop()
    kinds = (_kind(0), _kind(1))
    sys.stdout.flush()
    devnull = os.open(os.devnull, os.O_RDONLY)
    try:
        wire_in = _claim(0, devnull)
    finally:
        os.close(devnull)
    wire_out = _claim(1, 2)
    # The event loop makes its descriptors non-blocking, which the client's end shares: put that back.
    wires = (wire_in, wire_out)
    blocking = [None if kind == "thread" else os.get_blocking(fd) for kind, fd in zip(kinds, wires, strict=True)]
    transports: tuple[Any, Any] = (None, None)
    try:  # from here on, whatever fails, fd 0 and fd 1 get the wire back
        transports = await _connect(loop, kinds, wires, reader, writer)
        yield
    finally:
        writer.ended(await _close(transports, gone, close_timeout))
        sys.stdout.flush()  # anything printed while serving belongs to stderr, not the wire
        for fd, private, was_blocking in zip((0, 1), wires, blocking, strict=True):
            with suppress(OSError):
                if was_blocking is not None:
                    os.set_blocking(private, was_blocking)
                os.dup2(private, fd)
            if was_blocking is not None:  # a thread may still be blocked on its descriptor: never recycle it
                with suppress(OSError):
                    os.close(private)


async def _close(transports: tuple[Any, Any], gone: asyncio.Event, timeout: float) -> int:
    """Stop reading, write out what stdout still holds; the bytes the client did not take in time (0:
    all were written out, or stdout was lost before)."""
    reading, writing = transports
    if reading is not None and reading is not writing:
        reading.close()
    if writing is None:
        return 0
    writing.close()  # writes out what it still holds, then reports the connection lost
    with anyio.move_on_after(timeout, shield=True):
        await gone.wait()
    if gone.is_set():
        return 0
    unsent = max(writing.get_write_buffer_size(), 1)
    writing.abort()
    return unsent
