"""What every command shares: settings from flags and the environment, the caller's identity, and
one harness opened for the command's life. Commands reach data only through `Harness` methods."""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

from mcp_harness.config import ENV_PREFIX

if TYPE_CHECKING:  # the service (SQLAlchemy and all) is imported by the commands that open it
    from mcp_harness.identity import Identity
    from mcp_harness.service import Harness


def env(name: str, default: str) -> str:
    """An `MCP_HARNESS_*` setting, or the default when it is unset or empty."""
    return os.environ.get(ENV_PREFIX + name) or default


def identity(args: argparse.Namespace, *, with_agent: bool = False) -> Identity:
    """The stdio server's identity (`with_agent`: --agent, --role and their variables), else the CLI's."""
    from mcp_harness.identity import Identity, as_role

    workspace = args.workspace or env("WORKSPACE", "default")
    if not with_agent:
        return Identity(workspace=workspace, agent="cli")
    agent = getattr(args, "agent", None) or env("AGENT", "default")
    role = getattr(args, "role", None) or env("ROLE", "agent")
    return Identity(workspace=workspace, agent=agent, role=as_role(role, "MCP_HARNESS_ROLE"))


def person(args: argparse.Namespace) -> Identity:
    """A person acting from the command line, as an operator: --agent, else the login name, else `operator`."""
    import getpass

    from mcp_harness.config import NAME_PATTERN
    from mcp_harness.identity import Identity, reserved_agent

    name = getattr(args, "agent", None)
    if not name:
        try:
            name = getpass.getuser()
        except (OSError, KeyError, ImportError):
            name = None
        if not name or not re.fullmatch(NAME_PATTERN, name) or reserved_agent(name):
            name = "operator"
    return Identity(workspace=args.workspace or env("WORKSPACE", "default"), agent=name, role="operator")


def caller(args: argparse.Namespace) -> Identity:
    """Who runs a `msg` command. `--agent` names a person (an operator). Without it, a command run from an
    agent's session acts as that session's agent (`session_caller`), so that a reply reaches the session;
    otherwise it is the person at the terminal (`person`: the login name)."""
    from mcp_harness.identity import Identity

    if getattr(args, "agent", None):
        return person(args)
    workspace = args.workspace or env("WORKSPACE", "default")
    agent = session_caller(workspace)
    return Identity(workspace=workspace, agent=agent) if agent is not None else person(args)


def session_caller(workspace: str) -> str | None:
    """The agent of the session a command runs in (its shell: an ancestor process is a client whose stdio
    server recorded its identity, or `MCP_HARNESS_AGENT` or a session variable is set), resolved as the
    hooks and the commit guard resolve it (`identity.client_agent`); None outside a session."""
    from mcp_harness.cli.hook_call import DEFAULT_AGENT
    from mcp_harness.identity import client_agent, session_id, sessions_off
    from mcp_harness.sessions import recorded_agent

    named = os.environ.get(ENV_PREFIX + "AGENT")
    recorded = None if sessions_off() else recorded_agent(workspace)
    if recorded is not None and not named:
        return recorded
    if named or session_id() is not None:
        return client_agent(named or DEFAULT_AGENT, workspace)
    return None


def db_setting(args: argparse.Namespace) -> str | None:
    """What `--db` says, else MCP_HARNESS_DB (None: the default database)."""
    return args.db if args.db is not None else os.environ.get(ENV_PREFIX + "DB")


def check_db(args: argparse.Namespace, *, existing: bool) -> None:
    """Refuse a `--db` that looks mistyped before anything is created: a mistyped path must not look like
    an empty database. With `existing` (commands that only read or change what is there) a SQLite file
    that is not there; otherwise (commands that may make the database on first use, e.g. `token create`
    before the server's first start) a file whose folder is not there. `serve` creates both."""
    from mcp_harness.config import missing_db_file, missing_db_folder
    from mcp_harness.errors import NotFound

    given = db_setting(args)
    if existing and (missing := missing_db_file(given)) is not None:
        raise NotFound(f"no database at {missing}: check --db (or {ENV_PREFIX}DB); a server creates it on first use")
    if (folder := missing_db_folder(given)) is not None:
        raise NotFound(
            f"no folder {folder} for the database --db (or {ENV_PREFIX}DB) names: check the path, or create "
            "the folder first; nothing was created"
        )


def with_harness(args: argparse.Namespace, fn: Callable[[Harness], Awaitable[int]], *, existing: bool = False) -> int:
    """Open the database named by `--db` (or the environment), run `fn`, close it; a `--db` that looks
    mistyped is refused first (`check_db`, with `existing` for commands that only read or change what
    is there)."""
    import anyio

    from mcp_harness.config import Settings
    from mcp_harness.service import Harness

    check_db(args, existing=existing)
    settings = Settings.from_env(args.db)

    async def run() -> int:
        async with Harness.open(settings) as harness:
            return await fn(harness)

    return anyio.run(run)
