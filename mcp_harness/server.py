"""The MCP face of mcp-harness: tool adapters, error shaping and identity. No rules, no SQL here."""

from __future__ import annotations

import logging
import secrets
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Annotated, Any, Literal

from mcp.server.auth.middleware.auth_context import get_access_token
from mcp.server.mcpserver import Context, MCPServer
from mcp.types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field, ValidationError

from . import __version__
from .config import LEASE_SECONDS, MAX_INT, NAME_PATTERN, Settings
from .errors import Forbidden, HarnessError, Internal, InvalidArgument, NotFound, Unavailable
from .jsonvalue import dumps
from .models import (
    AddTasksResult,
    ClaimTaskResult,
    ListCheckpointsResult,
    ListTasksResult,
    ProgressStatus,
    RecordProgressResult,
    RestoreStateResult,
    SaveCheckpointResult,
    TaskSpec,
    TaskStatus,
    TaskView,
)
from .schema_text import compact_schema, shallow_output_schema
from .service import Harness, Identity

log = logging.getLogger("mcp_harness")

Thread = Annotated[str, Field(pattern=NAME_PATTERN)]
Key = Annotated[str, Field(pattern=NAME_PATTERN)]
IdemKey = str | None  # length checked by the service (1-200 characters)

INSTRUCTIONS = (
    "Durable memory and coordination for agents. Start every session with restore_state (state, recent "
    "progress, your held tasks). Work on ONE task at a time: claim_task, heartbeat long work, complete with "
    "verification. Record progress and save_checkpoint before you stop. Every writing tool takes an "
    "idempotency_key: a retry with the same key and arguments returns the first result and changes nothing."
)


@dataclass(frozen=True)
class ToolInfo:
    params: frozenset[str]
    read_only: bool
    fn: Callable[..., Awaitable[BaseModel]]
    validate: Callable[[dict[str, Any]], dict[str, Any]]  #: the SDK's own argument validation for the tool


class HarnessServer(MCPServer[Harness]):
    """`MCPServer` that answers every failure as `[code] message` and enforces identity and roles."""

    def __init__(self, *, identity: Identity | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.fixed_identity = identity
        self.tool_info: dict[str, ToolInfo] = {}
        self.harness: Harness | None = None  # stdio: set while the lifespan runs; HTTP: at construction

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

    def harness_tool(self, *, read_only: bool, destructive: bool = False, idempotent: bool = False):
        """Register a tool and remember its argument names and whether it writes."""

        def register(fn: Callable[..., Any]) -> Callable[..., Any]:
            name = fn.__name__
            self.tool(
                name=name,
                description=" ".join((fn.__doc__ or "").split()),
                # Only the hints that differ from the protocol's defaults: every byte is an agent's context.
                annotations=ToolAnnotations(read_only_hint=True)
                if read_only
                else ToolAnnotations(destructive_hint=destructive, idempotent_hint=idempotent or None),
            )(fn)
            tool = self._tool_manager.get_tool(name)  # the SDK offers no public hook for this
            tool.parameters = compact_schema(tool.parameters)
            if tool.fn_metadata.output_schema is not None:
                shallow = shallow_output_schema(tool.fn_metadata.output_schema)
                tool.fn_metadata.output_schema = compact_schema(shallow, output=True)
            params = frozenset(p for p in fn.__annotations__ if p != "return")
            validate = tool.fn_metadata.validate_arguments
            self.tool_info[name] = ToolInfo(params=params, read_only=read_only, fn=fn, validate=validate)
            return fn

        return register

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Context | None = None) -> Any:
        """Run a tool and shape its answer. The SDK's generic path (validate arguments, call, revalidate
        the returned model, dump it as indented JSON text, dump it again as structured content) costs
        a third of a save's time; our tools all return a model of their declared result, so this
        validates the arguments exactly as the SDK does, calls the tool, and dumps the model once."""
        try:
            info = self.tool_info.get(name)
            if info is None:
                raise NotFound(f"no tool named {name!r}; tools: {', '.join(sorted(self.tool_info))}")
            unknown = sorted(set(arguments) - info.params)
            if unknown:
                raise InvalidArgument(
                    f"unknown argument {', '.join(map(repr, unknown))} for {name}; "
                    f"allowed: {', '.join(sorted(info.params))}"
                )
            if not info.read_only and self.identity().role == "reader":
                raise Forbidden(f"{name} changes data; this token has the read-only 'reader' role")
            result = await info.fn(**info.validate(arguments))
            structured = result.model_dump(mode="json")
        except Exception as exc:  # noqa: BLE001 - the boundary: nothing escapes to the client raw
            return error_result(exc, name)
        # Compact JSON text: agents pay for every byte (the SDK would indent it).
        return CallToolResult(content=[TextContent(type="text", text=dumps(structured))], structured_content=structured)


def validation_message(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors()[:5]:
        loc = "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in err["loc"]).lstrip(".")
        parts.append(f"{loc or 'arguments'}: {err['msg']}")
    more = f" (and {exc.error_count() - 5} more)" if exc.error_count() > 5 else ""
    return "; ".join(parts) + more


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

    @asynccontextmanager
    async def lifespan(_server: MCPServer[Harness]) -> AsyncIterator[Harness]:
        if harness is not None:
            server.harness = harness
            yield harness
            return
        async with Harness.open(settings) as opened:
            await opened.checkpoints.purge_idempotency_keys()
            server.harness = opened
            try:
                yield opened
            finally:
                server.harness = None

    server = HarnessServer(
        name="mcp-harness",
        version=__version__,
        instructions=INSTRUCTIONS,
        identity=identity,
        lifespan=lifespan,
        log_level="WARNING",
        **server_kwargs,
    )
    server.harness = harness  # a shared harness serves requests (and token checks) from the start

    @server.harness_tool(read_only=False)
    async def save_checkpoint(
        state: dict[str, Any],
        thread: Thread = "main",
        mode: Literal["replace", "merge"] = "replace",
        label: Annotated[str | None, Field(max_length=200)] = None,
        metadata: dict[str, Any] | None = None,
        expected_version: Annotated[int | None, Field(ge=0, le=MAX_INT)] = None,
        idempotency_key: IdemKey = None,
    ) -> SaveCheckpointResult:
        """Save state as the thread's next version. mode=merge: RFC 7396 merge patch onto the latest state.
        expected_version: refuse unless the thread is at it (0 = no checkpoint yet)."""
        h, ident = server.current()
        return await h.checkpoints.save(
            ident,
            state=state,
            thread=thread,
            mode=mode,
            label=label,
            metadata=metadata,
            expected_version=expected_version,
            idempotency_key=idempotency_key,
        )

    @server.harness_tool(read_only=True)
    async def restore_state(
        thread: Thread = "main",
        version: Annotated[int | None, Field(ge=1, le=MAX_INT)] = None,
        checkpoint_id: str | None = None,
        label: Annotated[str | None, Field(max_length=200)] = None,
        paths: Annotated[list[Annotated[str, Field(max_length=1000)]] | None, Field(max_length=100)] = None,
        progress_limit: Annotated[int, Field(ge=0, le=100)] = 5,
    ) -> RestoreStateResult:
        """Resume brief: the latest state (or version/checkpoint_id/label; paths: JSON Pointers to return only
        those), recent progress, tasks you hold, task counts."""
        h, ident = server.current()
        return await h.restore(
            ident,
            thread=thread,
            version=version,
            checkpoint_id=checkpoint_id,
            label=label,
            paths=paths,
            progress_limit=progress_limit,
        )

    @server.harness_tool(read_only=True)
    async def list_checkpoints(
        thread: Thread = "main",
        limit: Annotated[int, Field(ge=1, le=200)] = 20,
        before_version: Annotated[int | None, Field(ge=1, le=MAX_INT)] = None,
    ) -> ListCheckpointsResult:
        """Checkpoint metadata, newest first; page with before_version=next_before_version."""
        h, ident = server.current()
        return await h.checkpoints.list(ident, thread=thread, limit=limit, before_version=before_version)

    @server.harness_tool(read_only=False)
    async def record_progress(
        summary: Annotated[str, Field(min_length=1)],
        thread: Thread = "main",
        status: ProgressStatus = "note",
        details: str | None = None,
        next_steps: Annotated[list[Annotated[str, Field(max_length=4000)]] | None, Field(max_length=50)] = None,
        task_key: Key | None = None,
        artifacts: dict[str, Any] | None = None,
        idempotency_key: IdemKey = None,
    ) -> RecordProgressResult:
        """Append to the progress log: what was done and how verified, next_steps, artifacts (files, commit)."""
        h, ident = server.current()
        return await h.progress.record(
            ident,
            summary=summary,
            thread=thread,
            status=status,
            details=details,
            next_steps=next_steps,
            task_key=task_key,
            artifacts=artifacts,
            idempotency_key=idempotency_key,
        )

    @server.harness_tool(read_only=False, idempotent=True)
    async def add_tasks(
        tasks: Annotated[list[TaskSpec], Field(min_length=1)],
        idempotency_key: IdemKey = None,
    ) -> AddTasksResult:
        """Add tasks: steps = acceptance steps, higher priority first, depends_on = keys done first. Identical re-
        adds are no-ops; a used key with other content is refused."""
        h, ident = server.current()
        return await h.tasks.add(ident, tasks=tasks, idempotency_key=idempotency_key)

    @server.harness_tool(read_only=False)
    async def claim_task(
        lease_seconds: Annotated[int, Field(ge=LEASE_SECONDS[0], le=LEASE_SECONDS[1])] = 900,
        tags: Annotated[list[Annotated[str, Field(max_length=64)]] | None, Field(max_length=32)] = None,
        task_key: Key | None = None,
        wait_seconds: Annotated[float, Field(ge=0, le=60)] = 0,
        idempotency_key: IdemKey = None,
    ) -> ClaimTaskResult:
        """Atomically claim the next claimable task (or task_key) under a lease; keep lease.token. wait_seconds
        long-polls. No task: see reason."""
        h, ident = server.current()
        return await h.tasks.claim(
            ident,
            lease_seconds=lease_seconds,
            tags=tags,
            task_key=task_key,
            wait_seconds=wait_seconds,
            idempotency_key=idempotency_key,
        )

    @server.harness_tool(read_only=False)
    async def update_task(
        task_key: Key,
        action: Literal["heartbeat", "complete", "fail", "release", "reopen"],
        lease_token: str | None = None,
        lease_seconds: Annotated[int | None, Field(ge=LEASE_SECONDS[0], le=LEASE_SECONDS[1])] = None,
        result: Any = None,
        verification: str | None = None,
        error: str | None = None,
        retry: bool = True,
        reason: str | None = None,
        idempotency_key: IdemKey = None,
    ) -> TaskView:
        """heartbeat, complete (needs verification), fail (retry=true backs off), release: all need lease_token.
        reopen (needs reason) revives a done or failed task."""
        h, ident = server.current()
        return await h.tasks.update(
            ident,
            task_key=task_key,
            action=action,
            lease_token=lease_token,
            lease_seconds=lease_seconds,
            result=result,
            verification=verification,
            error=error,
            retry=retry,
            reason=reason,
            idempotency_key=idempotency_key,
        )

    @server.harness_tool(read_only=True)
    async def list_tasks(
        status: Annotated[list[TaskStatus] | None, Field(max_length=5)] = None,
        tag: Annotated[str | None, Field(max_length=64)] = None,
        limit: Annotated[int, Field(ge=1, le=500)] = 50,
        cursor: str | None = None,
    ) -> ListTasksResult:
        """Tasks in creation order as compact rows, with workspace-wide counts."""
        h, ident = server.current()
        return await h.tasks.list(ident, status=status, tag=tag, limit=limit, cursor=cursor)

    from .resources import register_prompts, register_resources

    register_resources(server)
    register_prompts(server)
    return server
