"""MCP over stdin and stdout: the only stdio transport mcp-harness serves.

The MCP SDK's own stdio transport reads and writes through worker threads (one wake-up of another thread
per message in, two per message out), and when stdin closes it stops at once: requests still running
are cancelled and their answers lost. This one
- waits on pipes and sockets with the event loop itself (see `stdio_fds`; a terminal or a file gets a
  thread, with the same behaviour),
- answers every request it read before stdin ended, then ends (`DRAIN_SECONDS` at most); a claim
  still waiting for work stops waiting at once and claims nothing (`identity.caller_gone`),
- answers a line that is not a JSON-RPC message with a JSON-RPC error, with the request's id when it
  has one (JSON-RPC 2.0, section 5.1: parse errors and unreadable ids get a null id), and refuses a
  message over `MAX_MESSAGE_BYTES` the same way without buffering it,
- keeps serving, and storing, when the client stops reading or closes stdout (logged once).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections import Counter, deque
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import anyio
from mcp.shared.message import ServerMessageMetadata, SessionMessage
from mcp_types import (
    INVALID_PARAMS,
    INVALID_REQUEST,
    PARSE_ERROR,
    ErrorData,
    JSONRPCError,
    JSONRPCMessage,
    JSONRPCNotification,
    JSONRPCRequest,
    JSONRPCResponse,
    RequestId,
    jsonrpc_message_adapter,
)

from mcp_harness.arguments import mark_unpaired_surrogates
from mcp_harness.mcp.stdio_fds import wired

log = logging.getLogger("mcp_harness.mcp.stdio")

#: A message longer than this is refused (with an error answer) instead of being buffered without bound.
MAX_MESSAGE_BYTES = 64 * 1024 * 1024
#: Lines read ahead of the server before stdin is left unread for a while.
MAX_WAITING_LINES = 64
#: How long requests still running when stdin ends may take to answer (a `claim_task` waits up to 60 s).
DRAIN_SECONDS = 90.0
#: How long the last answers may take to reach a client that stopped reading, on the way out.
CLOSE_TIMEOUT_SECONDS = 5.0
#: How long answers wait for a client that is not reading before that is noted (once) while serving.
STALL_SECONDS = 30.0
#: Refused lines logged one by one; after that only their count, at the end.
LOGGED_REFUSALS = 5

# An id leading a message: reachable from its start over plain "jsonrpc"/"method" members only, so an
# "id" inside params can never be mistaken for it. Used where the whole message cannot be parsed.
_LEADING_ID = re.compile(
    rb'\s*\{(?:\s*"(?:jsonrpc|method)"\s*:\s*"[^"\\]*"\s*,)*\s*"id"\s*:\s*(-?[0-9]{1,18}|"[^"\\]{0,256}")\s*[,}]'
)
_HEAD_BYTES = 4096


class Outstanding:
    """Requests read from stdin and not answered yet: at the end of stdin the reader waits for them, so a
    client that sends and then closes stdin still gets every answer."""

    def __init__(self) -> None:
        self._ids: Counter[RequestId] = Counter()
        self._none_left = asyncio.Event()
        self._none_left.set()

    def opened(self, request_id: RequestId) -> None:
        self._ids[request_id] += 1
        self._none_left.clear()

    def settled(self, request_id: RequestId) -> None:
        left = self._ids.get(request_id)
        if left is None:
            return
        if left > 1:
            self._ids[request_id] = left - 1
            return
        del self._ids[request_id]
        if not self._ids:
            self._none_left.set()

    async def unanswered(self, request_id: RequestId) -> None:
        """The SDK's hook for a request that ends without an answer (the client cancelled it)."""
        self.settled(request_id)

    async def wait(self, timeout: float) -> None:
        with anyio.move_on_after(timeout):
            await self._none_left.wait()
        if self._ids:
            log.warning("stdin ended; %d requests still running are cancelled after %.0f s", len(self._ids), timeout)


class MessageWriter:
    """stdout as the session's write stream: each message is written as it is sent, one line each (the
    transport keeps the order of writes), waiting only while the client is not reading.

    Whether the client left answers untaken is decided once, at the connection's end (`ended`), from
    what stdout still held when the client was given up on and what was dropped because stdout failed.
    Not sooner: answers waiting when the session ends may still be taken while stdout closes (a client
    may read only once it has closed stdin). Not from the kernel's buffers: what they took is the
    client's to read whenever it likes."""

    def __init__(self, outstanding: Outstanding) -> None:
        self._outstanding = outstanding
        self._transport: Any = None
        self._writable = asyncio.Event()
        self._writable.set()
        self._lost: BaseException | None = None
        self._failed: BaseException | None = None  # the error stdout was lost with, if any
        self._dropped = 0  # answers not written because stdout was gone
        self._closed = self._stalled = False
        self.gone = asyncio.Event()  #: set when stdout is closed (by either end)

    # -- transport events (`stdio_fds.Ends`) ----------------------------------------------------

    def attach(self, transport: Any) -> None:
        self._transport = transport

    def pause(self) -> None:
        self._writable.clear()

    def resume(self) -> None:
        self._writable.set()

    def lost(self, exc: BaseException | None) -> None:
        # With an error, the transport dropped what it held: a write failed (EPIPE: the client closed
        # stdout), or the client closed a socket with answers unread in it (ECONNRESET).
        self._failed = self._failed or exc
        self._lost = exc or BrokenPipeError("stdout was closed")
        self.gone.set()
        self._writable.set()

    def ended(self, unsent: int) -> None:
        """The connection's end, with the bytes of answers stdout still held when the client was given
        up on (`stdio_fds.wired`): the one place that says the client did not take its answers."""
        if unsent:
            why = f"{unsent} bytes of answers were not taken"
        elif self._failed is not None:
            why = f"stdout failed ({self._failed}): what it held was lost, {self._dropped} later answers dropped"
        elif self._dropped:
            why = f"stdout was closed; {self._dropped} answers dropped"
        else:
            return
        log.warning("the client stopped reading stdout (%s)", why)

    # -- the SDK's WriteStream ------------------------------------------------------------------

    async def send(self, item: SessionMessage) -> None:
        message = item.message
        if isinstance(message, JSONRPCResponse | JSONRPCError) and message.id is not None:
            self._outstanding.settled(message.id)
        await self.write(message)

    async def write(self, message: JSONRPCMessage) -> None:
        if self._closed:
            raise anyio.ClosedResourceError
        if self._lost is not None or self._transport is None or self._transport.is_closing():
            self._dropped += 1
            raise anyio.BrokenResourceError
        self._transport.write(message.model_dump_json(by_alias=True, exclude_unset=True).encode() + b"\n")
        while not self._writable.is_set():
            with anyio.move_on_after(STALL_SECONDS) as waited:
                await self._writable.wait()
            if waited.cancelled_caught and not self._stalled:  # a notice while serving, not the verdict
                self._stalled = True
                log.warning("stdout: no answer taken for %.0f s; answers wait until the client reads", STALL_SECONDS)
        if self._lost is not None:
            raise anyio.BrokenResourceError

    async def aclose(self) -> None:
        self._closed = True

    async def __aenter__(self) -> MessageWriter:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


class TooLong(bytes):
    """A line over the limit: only its head is kept, to find the request's id."""


class MessageReader:
    """stdin as the session's read stream: splits the bytes into lines, parses each as a JSON-RPC
    message, answers lines that are not one itself, and stops reading while many lines wait."""

    def __init__(self, writer: MessageWriter, outstanding: Outstanding, limit: int = MAX_MESSAGE_BYTES) -> None:
        self._writer, self._outstanding, self._limit = writer, outstanding, limit
        self._partial = bytearray()
        self._head: bytes | None = None  # inside a line over the limit: its head, the rest is skipped
        self._lines: deque[bytes] = deque()
        self._more = asyncio.Event()
        self._eof = self._paused = False
        self._transport: Any = None
        self.refused = 0
        self.ended = anyio.Event()  #: set at the end of stdin: the client is gone, waiting claims stop

    # -- transport events (`stdio_fds.Ends`) ----------------------------------------------------

    def attach(self, transport: Any) -> None:
        self._transport = transport

    def feed(self, data: bytes) -> None:
        start = 0
        while (end := data.find(b"\n", start)) >= 0:
            self._take(data[start:end], line_ends=True)
            start = end + 1
        if start < len(data):
            self._take(data[start:], line_ends=False)
        if self._lines:
            self._more.set()
            if len(self._lines) > MAX_WAITING_LINES and not self._paused and not self._transport.is_closing():
                self._paused = True
                self._transport.pause_reading()

    def _take(self, piece: bytes, *, line_ends: bool) -> None:
        if self._head is None and len(self._partial) + len(piece) > self._limit:
            self._head = (bytes(self._partial[:_HEAD_BYTES]) + piece[:_HEAD_BYTES])[:_HEAD_BYTES]
            self._partial.clear()
        if self._head is None:
            if line_ends and not self._partial:
                if piece and not piece.isspace():
                    self._lines.append(piece)
                return
            self._partial += piece
        if line_ends:
            if self._head is not None:
                self._lines.append(TooLong(self._head))
            elif self._partial and not self._partial.isspace():
                self._lines.append(bytes(self._partial))
            self._partial.clear()
            self._head = None

    def feed_eof(self) -> None:
        if not self._eof:
            self._take(b"", line_ends=True)  # a last message without its newline
            self._eof = True
            self._more.set()
            self.ended.set()

    # -- the SDK's ReadStream -------------------------------------------------------------------

    async def receive(self) -> SessionMessage:
        while True:
            while not self._lines:
                if self._eof:
                    await self._outstanding.wait(DRAIN_SECONDS)
                    raise anyio.EndOfStream
                self._more.clear()
                await self._more.wait()
            if self._paused and len(self._lines) <= MAX_WAITING_LINES // 2 and not self._transport.is_closing():
                self._paused = False
                self._transport.resume_reading()
            line = self._lines.popleft()
            if isinstance(line, TooLong):
                why = f"a message over {self._limit} bytes (this server's limit for one line)"
                await self._refuse(why, [_error(leading_id(line), INVALID_REQUEST, why)])
                continue
            try:
                message = jsonrpc_message_adapter.validate_json(line, by_name=False)
            except Exception:  # noqa: BLE001 - whatever the parser says, the client gets an answer
                lenient = with_unpaired_surrogates_marked(line)
                if lenient is None:
                    await self._refuse(f"{len(line)} bytes that are not a JSON-RPC message", refusals(line))
                    continue
                message = lenient
            if isinstance(message, JSONRPCRequest):
                self._outstanding.opened(message.id)
                hook = partial(self._outstanding.unanswered, message.id)
                return SessionMessage(message, ServerMessageMetadata(on_request_unanswered=hook))
            if isinstance(message, JSONRPCNotification) and b'"id"' in line and _carries_id(line):
                await self._refuse("a request with an unusable id", refusals(line))
                continue
            return SessionMessage(message)

    async def _refuse(self, what: str, answers: list[JSONRPCError]) -> None:
        self.refused += 1
        if self.refused <= LOGGED_REFUSALS:
            more = " (further refusals are counted, not logged)" if self.refused == LOGGED_REFUSALS else ""
            log.warning("refused an incoming line: %s%s", what, more)
        for answer in answers:
            try:
                await self._writer.write(answer)
            except (anyio.BrokenResourceError, anyio.ClosedResourceError):
                return

    def __aiter__(self) -> MessageReader:
        return self

    async def __anext__(self) -> SessionMessage:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        """Nothing to release: the transports belong to `open_stdio` (one socket may carry stdout too)."""

    async def __aenter__(self) -> MessageReader:
        return self

    async def __aexit__(self, *exc_info: Any) -> None:
        await self.aclose()


def _error(request_id: RequestId | None, code: int, message: str) -> JSONRPCError:
    return JSONRPCError(jsonrpc="2.0", id=request_id, error=ErrorData(code=code, message=message))


def _carries_id(line: bytes) -> bool:
    """Whether a line the SDK's types read as a notification has an "id" member: then it is a request
    whose id is neither a string nor an integer (the types drop it), and it must be answered."""
    try:
        return "id" in json.loads(line)
    except (ValueError, RecursionError):
        return False


def with_unpaired_surrogates_marked(line: bytes) -> JSONRPCMessage | None:
    """A tool call that failed to parse only because an argument holds an unpaired surrogate escape
    (valid JSON text, not valid Unicode: pydantic's parser refuses it, Python's accepts it), with that
    argument marked so the tool answers `[invalid_argument]` naming it; else None."""
    if b"\\u" not in line:
        return None
    try:
        value = json.loads(line)
    except (ValueError, RecursionError):
        return None
    if not mark_unpaired_surrogates(value):
        return None
    try:
        return jsonrpc_message_adapter.validate_python(value, by_name=False)
    except Exception:  # noqa: BLE001 - not a message after all: refused as before
        return None


def leading_id(line: bytes) -> RequestId | None:
    """The id of a message that cannot be parsed whole (too long, nested too deep), if it leads it."""
    match = _LEADING_ID.match(line, 0, _HEAD_BYTES)
    return None if match is None else json.loads(match.group(1))


def request_id(value: Any) -> RequestId | None:
    rid = value.get("id") if isinstance(value, dict) else None
    return rid if isinstance(rid, str) or (isinstance(rid, int) and not isinstance(rid, bool)) else None


def refusals(line: bytes) -> list[JSONRPCError]:
    """The error answers to a line that is not a JSON-RPC message: one per request in it that has a
    usable id, else one with a null id; a malformed response is never answered."""
    try:
        value = json.loads(line)
    except RecursionError:
        return [_error(leading_id(line), INVALID_REQUEST, "message nested too deeply")]
    except ValueError:
        return [_error(None, PARSE_ERROR, "Parse error: a line must be one JSON-RPC message in UTF-8 JSON")]
    if isinstance(value, list):
        why = "batches are not supported: send one JSON-RPC message per line"
        requests = [item for item in value if isinstance(item, dict) and "method" in item]
        ids = [rid for item in requests if (rid := request_id(item)) is not None]
        return [_error(rid, INVALID_REQUEST, why) for rid in ids] or [_error(None, INVALID_REQUEST, why)]
    if isinstance(value, dict) and "method" not in value and ("result" in value or "error" in value):
        return []
    code, why = _fault(value)
    return [_error(request_id(value), code, why)]


def _fault(value: Any) -> tuple[int, str]:
    if not isinstance(value, dict):
        return INVALID_REQUEST, "a JSON-RPC message must be a JSON object"
    if value.get("jsonrpc") != "2.0":
        return INVALID_REQUEST, 'jsonrpc must be "2.0"'
    if "id" in value and request_id(value) is None:
        return INVALID_REQUEST, "id must be a string or an integer"
    if not isinstance(value.get("method"), str):
        return INVALID_REQUEST, "method must be a string"
    if "params" in value and not isinstance(value["params"], dict):
        return INVALID_PARAMS, "params must be an object"
    return INVALID_REQUEST, "not a valid JSON-RPC request or notification"


@asynccontextmanager
async def open_stdio() -> AsyncIterator[tuple[MessageReader, MessageWriter]]:
    """(read stream, write stream) of MCP messages over the process's stdin and stdout."""
    outstanding = Outstanding()
    writer = MessageWriter(outstanding)
    reader = MessageReader(writer, outstanding)
    try:
        async with wired(reader, writer, writer.gone, CLOSE_TIMEOUT_SECONDS):
            yield reader, writer
    finally:
        if reader.refused > LOGGED_REFUSALS:
            log.warning("refused %d incoming lines in all", reader.refused)
