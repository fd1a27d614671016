"""MCP resources (read-only views, declared in `RESOURCES` like the tools in `mcp.tools.TOOLS`) and prompts
(the long-running-agent session discipline)."""

from __future__ import annotations

import inspect
import re
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

from mcp.server.mcpserver import MCPServer, ResourceSecurity
from mcp.server.mcpserver.exceptions import ResourceError, ResourceNotFoundError
from mcp.shared.exceptions import MCPError
from mcp.types import INVALID_PARAMS

from mcp_harness.arguments import ListTasksArgs, RestoreStateArgs
from mcp_harness.errors import HarnessError, NotFound
from mcp_harness.identity import Identity
from mcp_harness.jsonvalue import dumps
from mcp_harness.tasks.rules import SHOWN

if TYPE_CHECKING:  # the service (SQLAlchemy and all) is imported when the database is opened
    from mcp_harness.service import Harness

JSON = "application/json"

#: the open harness and the caller's identity (`HarnessServer.current`)
Current = Callable[[], tuple["Harness", Identity]]
#: a resource's body: the open harness, the caller, the URI's parameters (as sent) -> a JSON value
Read = Callable[["Harness", Identity, dict[str, str]], Awaitable[Any]]


@dataclass(frozen=True)
class HarnessResource:
    """One read-only view: a URI (a template when it has `{name}` segments, each one path segment,
    percent-encoded), what the listing says of it, and the one service call that reads it."""

    uri: str
    name: str
    description: str
    read: Read

    @property
    def parameters(self) -> list[str]:
        return re.findall(r"\{(\w+)\}", self.uri)


def version_in(params: dict[str, str]) -> int:
    """The `{version}` of a checkpoint URI: a malformed one is the caller's mistake (-32602, one line)."""
    text = params["version"]
    if not (text.isascii() and text.isdigit() and 0 < len(text) <= 18 and int(text) > 0):
        raise MCPError(INVALID_PARAMS, f"version must be a positive whole number, not {text[:40]!r}")
    return int(text)


async def _threads(h: Harness, who: Identity, _params: dict[str, str]) -> Any:
    return {"threads": [t.model_dump(mode="json") for t in await h.checkpoints.threads(who)]}


async def _thread_state(h: Harness, who: Identity, params: dict[str, str]) -> Any:
    thread = unquote(params["thread"])
    brief = await h.restore(who, RestoreStateArgs(thread=thread, progress_limit=0))
    if not brief.found:
        raise NotFound(f"thread {thread!r} has no checkpoint")
    return brief.model_dump(mode="json", include={"checkpoint", "state"})


async def _checkpoint(h: Harness, who: Identity, params: dict[str, str]) -> Any:
    version = version_in(params)
    brief = await h.restore(who, RestoreStateArgs(thread=unquote(params["thread"]), version=version, progress_limit=0))
    return brief.model_dump(mode="json", include={"checkpoint", "state"})


async def _progress(h: Harness, who: Identity, _params: dict[str, str]) -> Any:
    return {"progress": [e.model_dump(mode="json") for e in await h.progress.recent(who, limit=50)]}


async def _tasks(h: Harness, who: Identity, _params: dict[str, str]) -> Any:
    return (await h.tasks.list(who, ListTasksArgs.model_validate({"status": list(SHOWN), "limit": 500}))).model_dump(
        mode="json"
    )


RESOURCES: tuple[HarnessResource, ...] = (
    HarnessResource("harness://threads", "threads", "Threads with their latest version and size", _threads),
    HarnessResource(
        "harness://threads/{thread}/state",
        "thread_state",
        "The latest state of a thread (thread percent-encoded)",
        _thread_state,
    ),
    HarnessResource(
        "harness://threads/{thread}/checkpoints/{version}",
        "checkpoint",
        "One checkpoint of a thread by version",
        _checkpoint,
    ),
    HarnessResource("harness://progress", "progress", "The 50 newest progress entries of the workspace", _progress),
    HarnessResource("harness://tasks", "tasks", "The task board: first 500 tasks and counts", _tasks),
)


def register_resources(
    server: MCPServer[Any], current: Current, resources: tuple[HarnessResource, ...] = RESOURCES
) -> None:
    """Offer each resource through the SDK's resource manager. Every URI parameter reaches `read` as the
    text sent (the reader parses it); `thread` is exempt from the SDK's drive-path check (`c:x`)."""
    security = ResourceSecurity(exempt_params={"thread"})
    for resource in resources:
        register = server.resource(
            resource.uri, name=resource.name, mime_type=JSON, description=resource.description, security=security
        )
        register(_handler(resource, current))


def _handler(resource: HarnessResource, current: Current) -> Callable[..., Awaitable[str]]:
    """The function the SDK calls: the URI's parameters as keywords (all text), the value as JSON text;
    our errors become the SDK's resource errors, with their `[code] message`."""

    async def handler(**params: str) -> str:
        try:
            h, ident = current()
            return dumps(await resource.read(h, ident, params))
        except NotFound as exc:
            raise ResourceNotFoundError(exc.to_text()) from exc
        except HarnessError as exc:
            raise ResourceError(exc.to_text()) from exc

    keyword = inspect.Parameter.KEYWORD_ONLY
    # what `inspect.signature` reads: the URI's parameters, which the SDK matches against the template
    handler.__dict__["__signature__"] = inspect.Signature(
        [inspect.Parameter(name, keyword, annotation=str) for name in resource.parameters], return_annotation=str
    )
    handler.__annotations__ = {**dict.fromkeys(resource.parameters, str), "return": str}
    handler.__name__ = resource.name
    return handler


INITIALIZE = """You are the INITIALIZER agent of a long-running project. Goal:

{goal}

Do exactly this, using the mcp-harness tools:
1. Call restore_state first. If tasks already exist (task_counts is not empty), stop: the project is
   initialized; follow the resume_session prompt instead.
2. Break the goal into small, independently verifiable tasks, as many as the goal needs (a small goal
   may need only a few), each doable in one focused session. For each: a stable key (e.g.
   "auth-login-form"), a title, a description, and `steps`: concrete acceptance steps a tester could
   follow end to end. Set depends_on where order matters and priority for what should come first.
   Give each task the `paths` it will touch (e.g. "src/auth/", "docs/*.md"): without them a claim
   reserves nothing and the commit guard never engages. Set review: true on risky work (a person
   approves the result before dependents start), and add a kind: "gate" task where a person must
   decide (a product or design sign-off). Put each irreversible step (tag, publish, deploy) in a task
   of its own that depends on the reviewed work, never inside a reviewed task's steps.
3. Call add_tasks with them (in batches if there are many), with a fresh idempotency_key (e.g. a UUID)
   per batch, reused only to retry that batch. Adding an identical task again changes nothing; a used
   task key with other content is refused.
4. Call save_checkpoint with the project's shared facts (goal, architecture decisions, how to run and
   test, conventions) and label "initialized".
5. Call record_progress (status "done") summarising the plan, with next_steps naming the first tasks.
Do not start implementing tasks in this session."""

RESUME = """You are a WORKING session of a long-running project (thread "{thread}"). Follow this loop:
1. First call restore_state(thread="{thread}"). Read the state, recent_progress (newest first, every
   thread) and my_tasks.
2. If my_tasks holds a claimed task, continue it (heartbeat with its lease token when expires_in_seconds
   runs low). A task with status "in_review" waits for a person: do not work on it. Otherwise call
   claim_task. If it returns no task, read `reason`: with a retry_after, wait (wait_seconds); without one
   waiting changes nothing: claim the work waiting_on names (waiting_on_other_work) or stop and report.
3. Work on that ONE task only. Do not start another task in this session.
4. Verify it end to end against every acceptance step (run it, test it, as a user would). Only then call
   update_task(action="complete", lease_token=..., verification="how you verified each step").
   If it fails, call update_task(action="fail", error=...). If you will not finish it, call
   update_task(action="release", reason="what is done, what is left") before you stop, so that another
   agent can take it at once (its claim shows your reason in the task's context). A lease with
   last_attempt: true is the task's last: release it rather than let it run out. lease_lost means the
   task is no longer yours: stop editing its files and do what the message says with your work.
   A regression in a done task: update_task(action="reopen", reason=...).
5. Call record_progress with task_key set to the task: what was done, how it was verified, artifacts
   (files, commit), next_steps.
6. Before you stop, call save_checkpoint(thread="{thread}", mode="merge", state={{...what the next
   session needs...}}) (mode "replace" keeps only what state holds: the rest of the state is dropped).
Never edit or delete tasks: tasks are only added, claimed, completed, failed, released or reopened."""


def register_prompts(server: MCPServer[Any]) -> None:
    @server.prompt(name="initialize_project", description="Initializer: turn a goal into verifiable tasks")
    def initialize_project(goal: str) -> str:
        return INITIALIZE.format(goal=goal)

    @server.prompt(name="resume_session", description="Working session: restore, do ONE task, verify, record")
    def resume_session(thread: str = "main") -> str:
        return RESUME.format(thread=thread)
