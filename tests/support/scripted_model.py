"""A scripted model behind the Anthropic Messages API, for driving the real Claude Code offline.

`ScriptedModel` is an HTTP server on loopback that Claude Code reaches through `ANTHROPIC_BASE_URL`.
Each session (told apart by Claude Code's `X-Claude-Code-Session-Id` header) plays a script: a list of
steps, one per request of the session's main conversation, answered as the real API streams them
(SSE: message_start, content blocks with text or tool_use and input_json_delta, message_delta,
message_stop). A step can say text, call tools (with arguments computed from what earlier calls
answered), answer an HTTP error such as 429 or 529, or stall. When a script runs out the model says
"Done." and ends its turn. Requests without `stream` and token counts get a short generic answer, and
so does a compaction (`/compact` asks the model for a summary in a streamed request of the session):
it is answered with a summary and plays no step, so a script says only what the conversation does.

Claude Code defers MCP tools until the model loads them with `ToolSearch`; `load(...)` is that call,
and `tool(...)` names a harness tool by its short name (`claim_task` is `mcp__harness__claim_task`).
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

SERVER = "harness"  #: the MCP server name `mcp-harness init` and the runner give Claude Code
COMPACTION = "create a detailed summary of the conversation"  #: in the request `/compact` sends
SUMMARY = "<analysis>The work so far.</analysis>\n<summary>The session worked on its task.</summary>"


def mcp_name(short: str) -> str:
    return short if short.startswith("mcp__") or short[:1].isupper() else f"mcp__{SERVER}__{short}"


@dataclass
class Turn:
    """What the model can see when a step is played: the request and the results of earlier calls."""

    session: str
    body: dict[str, Any]

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    def results(self) -> list[str]:
        """The text of every tool result so far, oldest first."""
        found = []
        for message in self.messages:
            content = message.get("content")
            if message.get("role") != "user" or not isinstance(content, list):
                continue
            for block in content:
                if block.get("type") == "tool_result":
                    found.append(_text_of(block.get("content")))
        return found

    def last(self) -> str:
        results = self.results()
        return results[-1] if results else ""

    def last_json(self) -> Any:
        """The last tool result parsed as JSON (the harness answers compact JSON text)."""
        return json.loads(self.last())

    def prompt(self) -> str:
        """All user text of the conversation so far (the prompt and what hooks added)."""
        parts = []
        for message in self.messages:
            if message.get("role") == "user":
                parts.append(_text_of(message.get("content")))
        return "\n".join(parts)


def _text_of(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return ""


Arguments = dict[str, Any] | Callable[[Turn], dict[str, Any]]


@dataclass
class Step:
    """One answer of the model: text and tool calls, or an HTTP error, or a stall."""

    text: str = ""
    calls: list[tuple[str, Arguments]] = field(default_factory=list)
    status: int = 200
    error_type: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    stall: float = 0.0
    usage: tuple[int, int] = (1000, 50)  #: input and output tokens reported


def say(text: str) -> Step:
    return Step(text=text)


def tool(name: str, arguments: Arguments | None = None, *, text: str = "") -> Step:
    return Step(text=text, calls=[(mcp_name(name), arguments or {})])


def calls(*pairs: tuple[str, Arguments]) -> Step:
    """Several tool calls in one answer (Claude Code runs them, then sends all their results)."""
    return Step(calls=[(mcp_name(n), a) for n, a in pairs])


def load(*names: str) -> Step:
    """Claude Code's ToolSearch call that loads deferred MCP tools by name."""
    query = "select:" + ",".join(mcp_name(n) for n in names)
    return Step(calls=[("ToolSearch", {"query": query, "max_results": max(5, len(names))})])


def error(status: int, error_type: str = "", **headers: str) -> Step:
    kinds = {429: "rate_limit_error", 529: "overloaded_error", 500: "api_error", 401: "authentication_error"}
    return Step(status=status, error_type=error_type or kinds.get(status, "api_error"), headers=headers)


def stall(seconds: float) -> Step:
    """Accept the request and send nothing for `seconds` (or until the server closes)."""
    return Step(stall=seconds)


Script = Sequence[Step] | Callable[[Turn], Sequence[Step]]


@dataclass
class Request:
    path: str
    headers: dict[str, str]
    body: dict[str, Any]
    at: float

    @property
    def session(self) -> str:
        return self.headers.get("x-claude-code-session-id", "")

    def text(self) -> str:
        """All text of the request's messages, every role (Claude Code sends a hook's context as a
        `system` message or a user text block beside the prompt)."""
        return "\n".join(_text_of(m.get("content")) for m in self.body.get("messages", []))

    def since_answer(self) -> str:
        """The text of the messages after the model's last answer: what this turn added (the prompt and
        what the hooks said with it)."""
        messages = self.body.get("messages", [])
        answers = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        tail = messages[answers[-1] + 1 :] if answers else messages
        return "\n".join(_text_of(m.get("content")) for m in tail)

    def hook_said(self, event: str) -> str:
        """What a hook (`UserPromptSubmit`, `SessionStart`) added to this turn, as Claude Code labels it
        ("UserPromptSubmit hook additional context: ..."); empty when it added nothing."""
        label = f"{event} hook additional context:"
        return "\n".join(t[len(label) :].strip() for t in self._texts_since_answer() if t.startswith(label))

    def _texts_since_answer(self) -> list[str]:
        messages = self.body.get("messages", [])
        answers = [i for i, m in enumerate(messages) if m.get("role") == "assistant"]
        texts = []
        for message in messages[answers[-1] + 1 :] if answers else messages:
            content = message.get("content")
            blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content or []
            texts += [b.get("text", "") for b in blocks if isinstance(b, dict) and b.get("type") == "text"]
        return texts

    @property
    def compaction(self) -> bool:
        """Claude Code asking for the summary that replaces the conversation (`/compact`)."""
        return any(COMPACTION in _text_of(m.get("content")) for m in self.body.get("messages", [])[-2:])


class ScriptedModel:
    """A Messages API on 127.0.0.1 playing `script` (the same steps for every session, or a function
    from the session's first request to its steps). `requests` keeps every request received."""

    def __init__(self, script: Script = ()) -> None:
        self.script = script
        self.requests: list[Request] = []
        self._plays: dict[str, Iterator[Step]] = {}
        self._lock = threading.Lock()
        self._closing = threading.Event()
        self._ids = itertools.count(1)
        model = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *_args: Any) -> None:
                pass

            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                size = int(self.headers.get("content-length") or 0)
                raw = self.rfile.read(size)
                try:
                    body = json.loads(raw or b"{}")
                except ValueError:
                    body = {}
                model._answer(
                    self, Request(self.path, {k.lower(): v for k, v in self.headers.items()}, body, time.time())
                )

            def do_GET(self) -> None:  # noqa: N802
                self._json(404, {"type": "error", "error": {"type": "not_found_error", "message": "not here"}})

            def _json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
                data = json.dumps(value).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in (headers or {}).items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

        self._handler = Handler
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def __enter__(self) -> ScriptedModel:
        self._thread.start()
        return self

    def __exit__(self, *_exc: Any) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    # -- what the tests read ------------------------------------------------------------------

    def conversation(self, session: str | None = None) -> list[Request]:
        """The streamed requests of one session (every session's when None), in order; compactions aside."""
        return [
            r
            for r in self.requests
            if r.body.get("stream") and not r.compaction and (session is None or r.session == session)
        ]

    def sessions(self) -> list[str]:
        seen: dict[str, None] = {}
        for r in self.conversation():
            seen.setdefault(r.session)
        return list(seen)

    # -- answering ------------------------------------------------------------------------------

    def _answer(self, handler: Any, request: Request) -> None:
        with self._lock:
            self.requests.append(request)
        if "count_tokens" in request.path:
            handler._json(200, {"input_tokens": 100})
            return
        if not request.body.get("stream"):
            handler._json(200, self._message([{"type": "text", "text": "ok"}], "end_turn", (10, 1), request))
            return
        if request.compaction:
            self._stream(handler, [{"type": "text", "text": SUMMARY}], "end_turn", (1000, 50), request)
            return
        step = self._next_step(request)
        if step.stall:
            self._closing.wait(step.stall)
            if self._closing.is_set():
                return
        if step.status != 200:
            message = {"type": "error", "error": {"type": step.error_type, "message": f"scripted {step.status}"}}
            handler._json(step.status, message, step.headers)
            return
        turn = Turn(request.session, request.body)
        blocks: list[dict[str, Any]] = []
        if step.text:
            blocks.append({"type": "text", "text": step.text})
        for name, arguments in step.calls:
            value = arguments(turn) if callable(arguments) else arguments
            blocks.append({"type": "tool_use", "id": f"toolu_{next(self._ids):06d}", "name": name, "input": value})
        if not blocks:
            blocks.append({"type": "text", "text": "Done."})
        self._stream(handler, blocks, "tool_use" if step.calls else "end_turn", step.usage, request)

    def _next_step(self, request: Request) -> Step:
        with self._lock:
            play = self._plays.get(request.session)
            if play is None:
                steps = self.script(Turn(request.session, request.body)) if callable(self.script) else self.script
                play = self._plays[request.session] = iter(list(steps))
            return next(play, Step())

    def _message(self, content: list[Any], stop: str | None, usage: tuple[int, int], request: Request) -> dict:
        return {
            "id": f"msg_{next(self._ids):06d}",
            "type": "message",
            "role": "assistant",
            "model": request.body.get("model", "claude-scripted"),
            "content": content,
            "stop_reason": stop,
            "stop_sequence": None,
            "usage": {"input_tokens": usage[0], "output_tokens": usage[1]},
        }

    def _stream(self, handler: Any, blocks: list[dict], stop: str, usage: tuple[int, int], request: Request) -> None:
        handler.send_response(200)
        handler.send_header("content-type", "text/event-stream")
        handler.send_header("cache-control", "no-cache")
        handler.send_header("connection", "close")
        handler.end_headers()
        handler.close_connection = True

        def event(kind: str, data: dict[str, Any]) -> None:
            handler.wfile.write(f"event: {kind}\ndata: {json.dumps({'type': kind, **data})}\n\n".encode())
            handler.wfile.flush()

        try:
            event("message_start", {"message": self._message([], None, (usage[0], 1), request)})
            for index, block in enumerate(blocks):
                if block["type"] == "text":
                    event("content_block_start", {"index": index, "content_block": {"type": "text", "text": ""}})
                    event(
                        "content_block_delta", {"index": index, "delta": {"type": "text_delta", "text": block["text"]}}
                    )
                else:
                    start = {"type": "tool_use", "id": block["id"], "name": block["name"], "input": {}}
                    event("content_block_start", {"index": index, "content_block": start})
                    text = json.dumps(block["input"])
                    for cut in range(0, len(text), 64):  # as the API streams it: partial JSON pieces
                        piece = {"type": "input_json_delta", "partial_json": text[cut : cut + 64]}
                        event("content_block_delta", {"index": index, "delta": piece})
                event("content_block_stop", {"index": index})
            event(
                "message_delta",
                {"delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": usage[1]}},
            )
            event("message_stop", {})
        except (BrokenPipeError, ConnectionResetError):
            pass
