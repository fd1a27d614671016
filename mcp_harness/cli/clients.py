"""MCP client configurations: what each client's entry for the harness looks like, where each
client keeps its file, and `mcp-harness config CLIENT` (a snippet for this machine, printed)."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path
from typing import Any

from mcp_harness.cli.common import env, identity
from mcp_harness.config import ENV_PREFIX
from mcp_harness.errors import InvalidArgument

CLIENTS = ("claude-desktop", "claude-code", "cursor", "vscode")
SERVER_NAME = "harness"
#: project-scoped configuration files: client -> (path inside the project, key holding the servers)
PROJECT_FILES = {
    "claude-code": (".mcp.json", "mcpServers"),
    "cursor": (".cursor/mcp.json", "mcpServers"),
    "vscode": (".vscode/mcp.json", "servers"),
}
#: how each client's configuration names an environment variable (its own expansion syntax)
ENV_REFERENCE = {"claude-code": "${%s}", "cursor": "${env:%s}", "vscode": "${env:%s}", "claude-desktop": "${%s}"}


def command_path() -> str:
    """The mcp-harness executable a client should launch (beside this Python if on PATH lookup fails)."""
    found = shutil.which("mcp-harness")
    if found:
        return str(Path(found).resolve())
    beside = Path(sys.executable).with_name("mcp-harness")
    return str(beside) if beside.exists() else f"{sys.executable} -m mcp_harness"


def desktop_config_path() -> Path:
    """Claude Desktop's `claude_desktop_config.json` on this platform."""
    home = Path.home()
    if sys.platform == "darwin":
        base = home / "Library" / "Application Support"
    elif sys.platform == "win32":
        base = Path(os.environ.get("APPDATA") or home / "AppData" / "Roaming")
    else:
        base = Path(os.environ.get("XDG_CONFIG_HOME") or home / ".config")
    return base / "Claude" / "claude_desktop_config.json"


def stdio_entry(client: str, command: str, args: list[str]) -> dict[str, Any]:
    """A client's entry that starts `command args` (a command line: `python -m mcp_harness` is split)."""
    exe, *pre = shlex.split(command)
    entry: dict[str, Any] = {"command": exe, "args": [*pre, *args]}
    return {"type": "stdio", **entry} if client in ("claude-code", "vscode") else entry


def http_entry(client: str, url: str, authorization: str) -> dict[str, Any]:
    """A client's entry for a shared server; `authorization` is the header's value."""
    if client == "claude-desktop":  # Desktop reaches remote servers through the mcp-remote bridge
        return {"command": "npx", "args": ["mcp-remote", url, "--header", f"Authorization: {authorization}"]}
    entry = {"url": url, "headers": {"Authorization": authorization}}
    return {"type": "http", **entry} if client in ("claude-code", "vscode") else entry


def token_reference(client: str, variable: str) -> str:
    """`Bearer ${VAR}` in the syntax the client expands (the token itself is never written)."""
    return "Bearer " + ENV_REFERENCE[client] % variable


def serve_args(workspace: str, agent: str | None, db: str | None) -> list[str]:
    return ["serve", *(["--db", db] if db else []), "--workspace", workspace, *(["--agent", agent] if agent else [])]


def snippet(client: str, transport: str, *, db: str, workspace: str, agent: str, url: str, token: str) -> str:
    """What `config CLIENT` prints: `claude mcp add ...` for Claude Code, a JSON file's content otherwise."""
    if client not in CLIENTS:
        raise InvalidArgument(f"client must be one of {', '.join(CLIENTS)}, got {client!r}")
    args = serve_args(workspace, agent, db)
    if transport == "stdio":
        entry = stdio_entry(client, command_path(), args)
        if client == "claude-code":
            return f"claude mcp add {SERVER_NAME} -- {shlex.join([entry['command'], *entry['args']])}"
    elif client == "claude-code":
        header = f"Authorization: Bearer {token}"
        return f"claude mcp add --transport http {SERVER_NAME} {url} --header {shlex.quote(header)}"
    elif client == "claude-desktop":
        entry = http_entry(client, url, "Bearer ${HARNESS_TOKEN}")
        entry["env"] = {"HARNESS_TOKEN": token}  # the bridge expands the variable from its environment
    else:
        entry = http_entry(client, url, f"Bearer {token}")
    key = PROJECT_FILES.get(client, ("", "mcpServers"))[1]
    return json.dumps({key: {SERVER_NAME: entry}}, indent=2)


def cmd_config(args: argparse.Namespace) -> int:
    from mcp_harness.config import resolve_db_url

    db = resolve_db_url(args.db or os.environ.get(ENV_PREFIX + "DB"), make_folder=False)  # printed, not opened
    if db.startswith("sqlite+aiosqlite:///"):
        db = db.removeprefix("sqlite+aiosqlite:///")  # a plain path reads better in a config file
    ident = identity(args, with_agent=True)
    agent = args.agent or env("AGENT", args.client)
    print(
        snippet(
            args.client,
            args.transport,
            db=db,
            workspace=ident.workspace,
            agent=agent,
            url=args.url or f"http://127.0.0.1:{env('PORT', '8765')}/mcp",
            token=args.token or "PASTE-TOKEN-FROM-mcp-harness-token-create",
        )
    )
    return 0
