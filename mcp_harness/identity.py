"""Who is calling: a small module of its own, so that a server (and a hook, on every prompt) can know
its identity before the service (and SQLAlchemy with it) is imported.

One identity per session: on stdio, when `MCP_HARNESS_SESSION` or
`CLAUDE_CODE_SESSION_ID` is set, the agent is `A:<first 8 characters of the session id>`. The server,
the lifecycle hooks and the commit guard all name a session through `session_agent`."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal, get_args

from mcp_harness.config import check_name
from mcp_harness.errors import InvalidArgument

if TYPE_CHECKING:
    import anyio

Role = Literal["agent", "reader", "operator"]
ROLES: tuple[Role, ...] = get_args(Role)  #: every role, in the order people read them


def as_role(value: str, source: str = "role") -> Role:
    """`value` as a role, or `invalid_argument` naming `source` and the roles there are."""
    if value not in ROLES:
        raise InvalidArgument(f"{source} must be one of {', '.join(ROLES)}, not {value!r}")
    return value


#: where a session id comes from, the first one set wins (Claude Code sets the second for each
#: session's stdio server, and the same id again on `--resume`)
SESSION_VARIABLES = ("MCP_HARNESS_SESSION", "CLAUDE_CODE_SESSION_ID")
NO_SESSION_VARIABLE = "MCP_HARNESS_NO_SESSION"
SUFFIX_LENGTH = 8
_NAME_CHARS = re.compile(r"[^A-Za-z0-9._-]")
_MAX_NAME = 128
#: names no caller may take, nor a session of them (`operators:x`), in any case: `operators` addresses the
#: people (their inbox is reached by the operator role alone), `harness` and `runner` sign the entries the
#: harness and the runner write themselves (notes a session reads as theirs, the runner's session reports)
RESERVED_AGENTS = frozenset({"operators", "harness", "runner"})


def reserved_agent(name: str) -> bool:
    """Whether `name` is a reserved name or a session of one."""
    return name.split(":", 1)[0].lower() in RESERVED_AGENTS


def check_agent(name: str) -> str:
    """Validate an agent's name: the contract's pattern, and none of the reserved names."""
    check_name("agent", name)
    if reserved_agent(name):
        raise InvalidArgument(
            f"agent {name!r} is a reserved name ({', '.join(sorted(RESERVED_AGENTS))} and their sessions name "
            "the people and the harness itself): choose another agent name"
        )
    return name


@dataclass(frozen=True)
class Identity:
    """Who is calling: fixed by the connection (command line or bearer token), never by tool arguments."""

    workspace: str
    agent: str
    role: Role = "agent"
    #: a stdio server ending its leases with it: its process (`sessions.this_process`), recorded with the
    #: leases it takes or renews, so a lease whose process is gone ends at the next look
    process: str | None = field(default=None, compare=False)
    #: the harness's own identities (its notes as `harness`, the runner's as `runner`), made in code only;
    #: every name that comes from outside (a token, `--agent`, the environment, a session) is checked
    own: bool = field(default=False, compare=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        check_name("workspace", self.workspace)
        if self.own:
            check_name("agent", self.agent)
        else:
            check_agent(self.agent)


def session_id(environ: Mapping[str, str] | None = None) -> str | None:
    """The session id the environment gives (`MCP_HARNESS_SESSION` wins), or None."""
    environ = os.environ if environ is None else environ
    for name in SESSION_VARIABLES:
        if environ.get(name):
            return environ[name]
    return None


def sessions_off(environ: Mapping[str, str] | None = None) -> bool:
    """`MCP_HARNESS_NO_SESSION=1` (or true/yes): every session of a client shares the plain agent name."""
    environ = os.environ if environ is None else environ
    return environ.get(NO_SESSION_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


KEEP_LEASES_VARIABLE = "MCP_HARNESS_KEEP_LEASES"


def leases_kept(environ: Mapping[str, str] | None = None) -> bool:
    """`MCP_HARNESS_KEEP_LEASES=1` (or true/yes): a session's leases outlive its connection and its end
    (a runner's sessions: the runner ends them itself, saying how the session went)."""
    environ = os.environ if environ is None else environ
    return environ.get(KEEP_LEASES_VARIABLE, "").strip().lower() in ("1", "true", "yes", "on")


def session_agent(agent: str, session: str | None) -> str:
    """`agent:<first 8 characters of session>`, or `agent` when there is no session. Characters a name
    cannot hold are dropped from the suffix; a long agent name is cut so the whole stays a valid name."""
    suffix = _NAME_CHARS.sub("", session or "")[:SUFFIX_LENGTH]
    if not suffix:
        return agent
    return f"{agent[: _MAX_NAME - len(suffix) - 1]}:{suffix}"


def stdio_agent(agent: str, *, no_session: bool = False, environ: Mapping[str, str] | None = None) -> str:
    """The agent a stdio server (or the guard, or a hook without a server record) acts as: `agent` with
    the session suffix when a session variable is set, unless `--no-session` / `MCP_HARNESS_NO_SESSION`."""
    if no_session or sessions_off(environ):
        return agent
    return session_agent(agent, session_id(environ))


def client_agent(
    agent: str,
    workspace: str,
    *,
    hook_session: str | None = None,
    no_session: bool = False,
    environ: Mapping[str, str] | None = None,
) -> str:
    """Who a hook or the commit guard of a client acts as: the agent that client's stdio server recorded
    for `workspace` (`sessions.py`; the same after `/clear`, which gives hooks a new session id), else
    the one that server derives, from `MCP_HARNESS_SESSION`, the hook's session id (`hook_session`, the
    one the server gets as `CLAUDE_CODE_SESSION_ID`) or `CLAUDE_CODE_SESSION_ID`, in that order."""
    environ = os.environ if environ is None else environ
    if no_session or sessions_off(environ):
        return agent
    from mcp_harness.sessions import recorded_agent

    found = recorded_agent(workspace)
    if found is not None and (found == agent or found.startswith(agent + ":")):
        return found
    own = environ.get(SESSION_VARIABLES[0]) or hook_session or environ.get(SESSION_VARIABLES[1])
    return session_agent(agent, own)


#: Set once the caller's connection has ended (stdio: stdin closed): a claim still waiting for work
#: stops waiting at once and claims nothing, since nobody is left to work on what it would take.
caller_gone: ContextVar[anyio.Event | None] = ContextVar("caller_gone", default=None)
