"""The MCP face of mcp-harness: the server, error shaping and identity. No rules, no SQL here; the tools
themselves are listed in `mcp_tools`, resources and prompts in `resources`."""

from __future__ import annotations

import logging
import secrets
from collections.abc import Awaitable, Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, Tool
from pydantic import BaseModel, ValidationError

from . import __version__
from .arguments import validation_message
from .config import Settings
from .errors import Forbidden, HarnessError, Internal, InvalidArgument, NotFound, Unavailable
from .identity import Identity, caller_gone
from .jsonvalue import dumps
from .lifespan import harness_lifespan
from .mcp_tools import TOOLS, HarnessTool
from .metrics import observe_tool_calls
from .resources import register_prompts, register_resources

if TYPE_CHECKING:  # the service (SQLAlchemy and all) is imported when the database is opened
    from mcp.server.mcpserver.resources import ReadResourceContents

    from .service import Harness

log = logging.getLogger("mcp_harness")

INSTRUCTIONS = (
    "Durable memory and coordination for agents. Start every session with restore_state (state, recent "
    "progress, your held tasks). Work on ONE task at a time: claim_task, heartbeat long work, complete with "
    "verification. Record progress and save_checkpoint before you stop. Every writing tool takes an "
    "idempotency_key: a retry with the same key and arguments returns the first result and changes nothing."
)


class HarnessServer(MCPServer[Any]):
    """`MCPServer` that answers every failure as `[code] message` and enforces identity and roles."""

    def __init__(self, *, identity: Identity | None, tools: Iterable[HarnessTool] = TOOLS, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fixed_identity = identity
        self.tools: dict[str, HarnessTool] = {}
        for tool in tools:
            self.add_harness_tool(tool)
        self.harness: Harness | None = None  # stdio: set once the lifespan has opened it; HTTP: at construction
        self.opened: anyio.Event | None = None  # stdio: set when an attempt to open the harness has ended
        self.open_error: HarnessError | None = None  # stdio: why the last attempt failed
        self.retry: anyio.Event | None = None  # stdio: set to make a failed opening try again
        self.opens_itself = False  # stdio: the lifespan opens the harness (HTTP is given an open one)
        self.wanted: anyio.Event | None = None  # stdio: set once the handshake is over or a call needs the harness

    def add_harness_tool(self, tool: HarnessTool) -> None:
        """Offer a tool (listed after the ones before it); tools are ours alone, not the SDK's tool manager."""
        self.tools[tool.name] = tool

    def harness_tool(self, *, read_only: bool, destructive: bool = False, idempotent: bool = False):
        """Register an async function as a tool: its typed parameters are the arguments, its docstring the
        description, and it returns a model."""

        def register(fn: Callable[..., Awaitable[BaseModel]]) -> Callable[..., Awaitable[BaseModel]]:
            tool = HarnessTool.from_function(fn, read_only=read_only, destructive=destructive, idempotent=idempotent)
            self.add_harness_tool(tool)
            return fn

        return register

    async def ready(self) -> None:
        """Wait until the harness is open: a stdio server opens it in the background, so that the
        client's handshake (initialize, tools/list) is answered without waiting for the database.
        After a failed attempt, the next call starts another."""
        if self.harness is not None or not self.opens_itself:
            return
        if self.wanted is not None:
            self.wanted.set()
        if self.open_error is not None and self.retry is not None:
            self.open_error, self.opened = None, anyio.Event()
            self.retry.set()
        assert self.opened is not None
        await self.opened.wait()
        if self.open_error is not None:
            raise self.open_error

    async def read_resource(self, uri: Any, context: Context | None = None) -> Iterable[ReadResourceContents] | Any:
        try:
            await self.ready()
        except HarnessError as exc:
            raise ResourceError(exc.to_text()) from exc
        return await super().read_resource(uri, context)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context | None = None
    ) -> Any:
        """An unknown prompt or a missing required argument is the caller's mistake: answer JSON-RPC invalid
        params (-32602) in one line, where the SDK would answer an internal error and log a traceback."""
        prompts = {p.name: p for p in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"no prompt named {name!r}; prompts: {', '.join(sorted(prompts))}")
        given = arguments or {}
        missing = [a.name for a in prompt.arguments or [] if a.required and not given.get(a.name)]
        if missing:
            raise MCPError(INVALID_PARAMS, f"prompt {name!r} needs the argument {', '.join(missing)} (non-empty)")
        return await super().get_prompt(name, arguments, context)

    def current(self) -> tuple[Harness, Identity]:
        """The open harness and the caller's identity, for any handler (tools, resources)."""
        if self.harness is None:
            raise Unavailable("the server is starting or stopping; retry shortly")
        return self.harness, self.identity()

    def run(self, transport: Literal["stdio", "sse", "streamable-http"] = "stdio", **kwargs: Any) -> None:
        """As MCPServer's, but a closed stdin or stdout is refused in one line before serving stdio."""
        if transport == "stdio":
            from .stdio_fds import check_open

            check_open()
        super().run(transport, **kwargs)  # type: ignore[call-overload]

    async def run_stdio_async(self) -> None:
        """Serve stdio with `mcp_harness.stdio`'s transport, which answers every request (the SDK's drops
        the answers of requests still running when stdin closes)."""
        from .stdio import open_stdio

        # `MCPServer` serves its low-level server on the SDK's own stdio transport only and keeps it
        # private (`_lowlevel_server`; the SDK's in-memory client reads it, with a to-do to make it
        # public). Its public, documented way out is the streamable HTTP session manager, whose `app`
        # is that server: building the (unused) HTTP app takes ~0.2 ms and serves stdio with
        # everything MCPServer wires (handlers, middleware, lifespan), unchanged.
        self.streamable_http_app()
        lowlevel = self.session_manager.app
        async with open_stdio() as (read_stream, write_stream):
            caller_gone.set(read_stream.ended)  # the request handlers' tasks inherit it
            await lowlevel.run(read_stream, write_stream, lowlevel.create_initialization_options())

    def identity(self) -> Identity:
        """stdio: the identity given on the command line. HTTP: the one the bearer token names."""
        if self.fixed_identity is not None:
            return self.fixed_identity
        token = get_access_token()
        claims = (token.claims or {}) if token is not None else {}
        if not claims.get("workspace"):
            raise Forbidden("this request carries no valid bearer token")
        return Identity(workspace=claims["workspace"], agent=claims["agent"], role=claims.get("role", "agent"))

    async def list_tools(self) -> list[Tool]:
        if self.wanted is not None:
            self.wanted.set()  # the client has what it needs to start: now open the database
        return [tool.published for tool in self.tools.values()]

    @observe_tool_calls  # the metrics: calls by tool and result code, latency per tool
    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        """Run a tool and shape its answer: every failure as `[code] message`, a success as compact JSON text
        and structured content, the result model dumped once (the SDK's generic path would validate the
        returned model again and dump it twice, a third of a save's time)."""
        try:
            await self.ready()
            tool = self.tools.get(name)
            if tool is None:
                raise NotFound(f"no tool named {name!r}; tools: {', '.join(sorted(self.tools))}")
            allowed = tool.args.model_fields
            unknown = sorted(set(arguments) - set(allowed))
            if unknown:
                takes = f"allowed: {', '.join(sorted(allowed))}" if allowed else "it takes no arguments"
                raise InvalidArgument(f"unknown argument {', '.join(map(repr, unknown))} for {name}; {takes}")
            if not tool.read_only and self.identity().role == "reader":
                raise Forbidden(f"{name} changes data; this token has the read-only 'reader' role")
            args = tool.parse(arguments)
            harness, ident = self.current()
            result = await tool.call(harness, ident, args)
            structured = result.model_dump(mode="json")
        except Exception as exc:  # noqa: BLE001 - the boundary: nothing escapes to the client raw
            return error_result(exc, name)
        # Compact JSON text: agents pay for every byte (the SDK would indent it).
        return CallToolResult(content=[TextContent(type="text", text=dumps(structured))], structured_content=structured)


def error_result(exc: BaseException, tool: str) -> CallToolResult:
    if isinstance(exc, HarnessError):
        error = exc
    elif isinstance(exc, ValidationError):
        error = InvalidArgument(validation_message(exc))
    else:
        incident = secrets.token_hex(6)
        log.error("internal error %s in tool %s", incident, tool, exc_info=exc)
        error = Internal(f"unexpected error in {tool} (incident {incident}); the server log has the details")
    return CallToolResult(content=[TextContent(type="text", text=error.to_text())], is_error=True)


def create_server(
    settings: Settings, identity: Identity | None, *, harness: Harness | None = None, **server_kwargs: Any
) -> HarnessServer:
    """Build the MCP server. `identity` is fixed for stdio; None means it comes from bearer tokens.
    Without `harness` the server opens (and closes) its own for the life of the connection."""

    server = HarnessServer(
        name="mcp-harness",
        version=__version__,
        instructions=INSTRUCTIONS,
        identity=identity,
        lifespan=harness_lifespan(settings, harness),
        log_level="WARNING",
        **server_kwargs,
    )
    server.harness = harness  # a shared harness serves requests (and token checks) from the start
    register_resources(server, server.current)
    register_prompts(server)
    return server
