"""The MCP face of mcp-harness: the server, error shaping and identity. No rules, no SQL here; the tools
themselves are listed in `mcp.tools`, resources and prompts in `resources`."""

from __future__ import annotations

import logging
import secrets
import signal
from collections.abc import Iterable
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any, Literal

import anyio
from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.auth.provider import AccessToken
from mcp.server.context import CallNext, HandlerResult, ServerRequestContext
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ResourceError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS, CallToolResult, TextContent, Tool
from pydantic import ValidationError
from starlette.requests import Request

from mcp_harness import __version__, signals
from mcp_harness.arguments import UNPAIRED_SURROGATE, validation_message
from mcp_harness.config import Settings
from mcp_harness.errors import Forbidden, HarnessError, Internal, InvalidArgument, NotFound, Unavailable
from mcp_harness.identity import Identity, Role, caller_gone
from mcp_harness.jsonvalue import dumps
from mcp_harness.mcp.lifespan import ConnectionLeases, HarnessState, harness_lifespan
from mcp_harness.mcp.metrics import observe_tool_call, start_series
from mcp_harness.mcp.resources import register_prompts, register_resources
from mcp_harness.mcp.sdk import serve_streams
from mcp_harness.mcp.tools import TOOLS, HarnessTool, with_inbox

if TYPE_CHECKING:  # the service (SQLAlchemy and all) is imported when the database is opened
    from mcp.server.lowlevel.helper_types import ReadResourceContents
    from mcp.types import InputRequiredResult
    from pydantic import AnyUrl

    from mcp_harness.service import Harness

log = logging.getLogger("mcp_harness")

_IDEMPOTENCY = (
    "Every writing tool takes an idempotency_key: a retry with the same key and arguments returns the first result "
    "and changes nothing."
)
#: what each role is told at the start of a connection: what that role does (every byte is context)
INSTRUCTIONS: dict[Role, str] = {
    "agent": "Durable memory and coordination for agents. Start every session with restore_state (state, recent "
    "progress, your held tasks; the log wins over an older state). Work on ONE task at a time: claim_task, "
    "heartbeat long work, complete with verification. Record progress and save_checkpoint before you stop. "
    + _IDEMPOTENCY,
    "reader": "Durable memory and coordination for agents, read-only for you (role reader): restore_state, "
    "list_checkpoints, list_tasks and the harness:// resources show the state, progress and tasks (the log wins "
    "over an older state). Tools that change data answer forbidden.",
    "operator": "Durable memory and coordination for agents; you act for a person (role operator): you review and "
    'steer, agents claim and do the work. list_tasks(status="in_review") shows what waits for you; update_task '
    "approve or reject (comment) it, and retry_now, cancel (reason), reopen (reason) or release (reason) a task. "
    + _IDEMPOTENCY,
}


async def instructions_by_role(ctx: ServerRequestContext[Any, Any], call_next: CallNext) -> HandlerResult:
    """Server middleware (HTTP): answer `initialize` (and the 2026 protocol's `server/discover`) with the
    instructions of the bearer token's role. The authenticated user is read from the HTTP request: initialize
    runs outside the request's context variables."""
    result = await call_next(ctx)
    if ctx.method not in ("initialize", "server/discover") or not isinstance(result, dict):
        return result
    user = ctx.request.scope.get("user") if isinstance(ctx.request, Request) else None
    token = getattr(user, "access_token", None)
    role = (token.claims or {}).get("role") if isinstance(token, AccessToken) else None
    return {**result, "instructions": INSTRUCTIONS[role if role in INSTRUCTIONS else "agent"]}


class HarnessServer(MCPServer[Any]):
    """`MCPServer` that answers every failure as `[code] message` and enforces identity and roles."""

    def __init__(
        self, *, identity: Identity | None, state: HarnessState, tools: Iterable[HarnessTool] = TOOLS, **kwargs: Any
    ) -> None:
        super().__init__(**kwargs)
        self.fixed_identity = identity
        self.state = state
        #: the tools offered, in order: ours alone, not the SDK's tool manager
        self.tools: dict[str, HarnessTool] = {tool.name: tool for tool in tools}
        start_series(list(self.tools))  # the metrics: every tool's series at 0 from the start

    async def read_resource(
        self, uri: AnyUrl | str, context: Context[Any, Any] | None = None
    ) -> Iterable[ReadResourceContents] | InputRequiredResult:
        try:
            await self.state.ready()
        except HarnessError as exc:
            raise ResourceError(exc.to_text()) from exc
        return await super().read_resource(uri, context)

    async def get_prompt(
        self, name: str, arguments: dict[str, Any] | None = None, context: Context[Any, Any] | None = None
    ) -> Any:
        """An unknown prompt, an unknown argument or a missing required one is the caller's mistake: answer
        JSON-RPC invalid params (-32602) in one line, where the SDK would answer an internal error and log a
        traceback."""
        prompts = {p.name: p for p in await self.list_prompts()}
        prompt = prompts.get(name)
        if prompt is None:
            raise MCPError(INVALID_PARAMS, f"no prompt named {name!r}; prompts: {', '.join(sorted(prompts))}")
        given = arguments or {}
        known = [a.name for a in prompt.arguments or []]
        unknown = sorted(set(given) - set(known))
        if unknown:
            raise MCPError(
                INVALID_PARAMS,
                f"prompt {name!r} has no argument {', '.join(map(repr, unknown))}; "
                f"arguments: {', '.join(known) or 'none'}",
            )
        missing = [a.name for a in prompt.arguments or [] if a.required and not given.get(a.name)]
        if missing:
            raise MCPError(INVALID_PARAMS, f"prompt {name!r} needs the argument {', '.join(missing)} (non-empty)")
        return await super().get_prompt(name, arguments, context)

    def current(self) -> tuple[Harness, Identity]:
        """The open harness and the caller's identity, for any handler (tools, resources)."""
        if self.state.harness is None:
            raise Unavailable("the server is starting or stopping; retry shortly")
        return self.state.harness, self.identity()

    def run(self, transport: Literal["stdio", "sse", "streamable-http"] = "stdio", **kwargs: Any) -> None:
        """As MCPServer's, but a closed stdin or stdout is refused in one line before serving stdio."""
        if transport == "stdio":
            from mcp_harness.mcp.stdio_fds import check_open

            check_open()
        super().run(transport, **kwargs)

    async def run_stdio_async(self) -> None:
        """Serve stdio with `mcp_harness.mcp.stdio`'s transport, which answers every request (the SDK's drops
        the answers of requests still running when stdin closes)."""
        from mcp_harness.mcp.stdio import open_stdio

        async with open_stdio() as (read_stream, write_stream):
            caller_gone.set(read_stream.ended)  # the request handlers' tasks inherit it
            async with anyio.create_task_group() as tg:
                signalled = anyio.Event()
                tg.start_soon(self._end_on_signal, signalled, tg.cancel_scope)
                tg.start_soon(self._end_at_eof, read_stream.ended)
                with _signals(signalled, self.state.leases):
                    await serve_streams(self, read_stream, write_stream)
                tg.cancel_scope.cancel()  # served to the end of stdin: stop watching for signals

    async def _end_at_eof(self, ended: anyio.Event) -> None:
        """At the end of stdin the client is gone: its leases end then, not once the requests still running
        are answered (the reader waits for those, up to `stdio.DRAIN_SECONDS`). A lease one of them takes
        or renews meanwhile ends when the connection closes (the lifespan ends what is left)."""
        await ended.wait()
        if self.state.leases is not None and self.state.harness is not None:
            await self.state.leases.end(self.state.harness)

    async def _end_on_signal(self, signalled: anyio.Event, scope: anyio.CancelScope) -> None:
        """After SIGTERM, SIGINT or SIGHUP: end the connection's leases while the database is still open,
        then end the serving (the lifespan closes the database)."""
        await signalled.wait()
        if self.state.leases is not None and self.state.harness is not None:
            await self.state.leases.end(self.state.harness)
        scope.cancel()

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
        self.state.handshake_over()  # the client has what it needs to start: now open the database
        return [tool.published for tool in self.tools.values()]

    async def call_tool(
        self, name: str, arguments: dict[str, Any], context: Context[Any, Any] | None = None
    ) -> CallToolResult:
        """Run a tool, counted and timed by the metrics (calls by tool and result code, latency per tool)."""
        return await observe_tool_call(self.tools, name, arguments, self._call_tool(name, arguments))

    async def _call_tool(self, name: str, arguments: dict[str, Any]) -> CallToolResult:
        """Run a tool and shape its answer: every failure as `[code] message`, a success as compact JSON text
        and structured content, the result model dumped once (the SDK's generic path would validate the
        returned model again and dump it twice, a third of a save's time)."""
        try:
            await self.state.ready()
            tool = self.tools.get(name)
            if tool is None:
                raise NotFound(f"no tool named {name!r}; tools: {', '.join(sorted(self.tools))}")
            allowed = tool.args.model_fields
            unknown = sorted(set(arguments) - set(allowed))
            if unknown:
                takes = f"allowed: {', '.join(sorted(allowed))}" if allowed else "it takes no arguments"
                raise InvalidArgument(f"unknown argument {', '.join(map(repr, unknown))} for {name}; {takes}")
            unpaired = [
                arg for arg, value in arguments.items() if isinstance(value, str) and value == UNPAIRED_SURROGATE
            ]
            if unpaired:
                raise InvalidArgument(
                    f"{', '.join(unpaired)}: not valid Unicode (an unpaired surrogate escape such as \\ud800); "
                    "send the text as UTF-8"
                )
            if not tool.read_only and self.identity().role == "reader":
                raise Forbidden(f"{name} changes data; this token has the read-only 'reader' role")
            args = tool.parse(arguments)
            harness, ident = self.current()
            await harness.contacts.touch(ident, name)  # liveness: at most one small write per agent per 5 s
            with harness.contacts.serving(ident, name):  # a claim or complete writes the contact with its change
                result = await tool.call(harness, ident, args)
                if tool.inbox:
                    result = await with_inbox(harness, ident, result)
                if tool.outcome:  # why it is idle: the claim's answer, or the task it let go
                    await harness.contacts.touch(ident, name, result, getattr(args, "action", None))
            if tool.leases and self.state.leases is not None:
                # a lease this connection took or renewed (or used since) ends with it
                self.state.leases.saw(result, getattr(args, "lease_token", None))
            structured = result.model_dump(mode="json")
        except Exception as exc:  # noqa: BLE001 - the boundary: nothing escapes to the client raw
            return error_result(exc, name)
        # Compact JSON text: agents pay for every byte (the SDK would indent it).
        return CallToolResult(content=[TextContent(type="text", text=dumps(structured))], structured_content=structured)


def _signals(signalled: anyio.Event, leases: ConnectionLeases | None) -> AbstractContextManager[None]:
    """SIGTERM, SIGINT and SIGHUP end the connection as a closed stdin does (`HarnessServer._end_on_signal`:
    its leases end, then the database closes before the process exits)."""

    def stop(sig: signal.Signals) -> None:
        if leases is not None:
            leases.why = f"its connection ended ({sig.name})"
        signalled.set()

    return signals.handled(stop)


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
    settings: Settings,
    identity: Identity | None,
    *,
    harness: Harness | None = None,
    end_leases: bool = False,
    **server_kwargs: Any,
) -> HarnessServer:
    """Build the MCP server. `identity` is fixed for stdio; None means it comes from bearer tokens.
    Without `harness` the server opens (and closes) its own for the life of the connection; with
    `end_leases` (stdio) the leases the connection took or renewed end with it."""
    # a shared harness serves requests (and token checks) from the start
    state = HarnessState(harness=harness)
    if end_leases and identity is not None:
        state.leases = ConnectionLeases(identity)
    server = HarnessServer(
        name="mcp-harness",
        version=__version__,
        instructions=INSTRUCTIONS[identity.role if identity is not None else "agent"],
        identity=identity,
        state=state,
        lifespan=harness_lifespan(settings, harness, state),
        log_level="WARNING",
        # HTTP: the role is the bearer token's, known at each initialize
        middleware=[instructions_by_role] if identity is None else None,
        **server_kwargs,
    )
    register_resources(server, server.current)
    register_prompts(server)
    return server
