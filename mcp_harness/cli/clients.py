"""`mcp-harness config CLIENT`: the exact configuration snippet for a client, filled in for this machine."""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
from pathlib import Path

from ..config import ENV_PREFIX
from ..errors import InvalidArgument
from .common import env, identity

CLIENTS = ("claude-desktop", "claude-code", "cursor")


def command_path() -> str:
    """The mcp-harness executable a client should launch (beside this Python if on PATH lookup fails)."""
    found = shutil.which("mcp-harness")
    if found:
        return str(Path(found).resolve())
    beside = Path(sys.executable).with_name("mcp-harness")
    return str(beside) if beside.exists() else f"{sys.executable} -m mcp_harness"


def snippet(client: str, transport: str, *, db: str, workspace: str, agent: str, url: str, token: str) -> str:
    if client not in CLIENTS:
        raise InvalidArgument(f"client must be one of {', '.join(CLIENTS)}, got {client!r}")
    name = "harness"
    if transport == "stdio":
        exe, *pre = shlex.split(command_path())
        args = [*pre, "serve", "--db", db, "--workspace", workspace, "--agent", agent]
        if client == "claude-code":
            return f"claude mcp add {name} -- {shlex.join([exe, *args])}"
        return json.dumps({"mcpServers": {name: {"command": exe, "args": args}}}, indent=2)
    header = f"Authorization: Bearer {token}"
    if client == "claude-code":
        return f"claude mcp add --transport http {name} {url} --header {shlex.quote(header)}"
    if client == "cursor":
        return json.dumps({"mcpServers": {name: {"url": url, "headers": {"Authorization": f"Bearer {token}"}}}},
                          indent=2)  # fmt: skip
    # Claude Desktop reaches remote servers through the mcp-remote bridge
    bridge = {"command": "npx", "args": ["mcp-remote", url, "--header", "Authorization: Bearer ${HARNESS_TOKEN}"],
              "env": {"HARNESS_TOKEN": token}}  # fmt: skip
    return json.dumps({"mcpServers": {name: bridge}}, indent=2)


def cmd_config(args: argparse.Namespace) -> int:
    from ..config import resolve_db_url

    db = resolve_db_url(args.db or os.environ.get(ENV_PREFIX + "DB"))
    if db.startswith("sqlite+aiosqlite:///"):
        db = db.removeprefix("sqlite+aiosqlite:///")  # a plain path reads better in a config file
    ident = identity(args, with_agent=True)
    agent = args.agent or env("AGENT", args.client)
    print(snippet(args.client, args.transport, db=db, workspace=ident.workspace, agent=agent,
                  url=args.url or f"http://127.0.0.1:{env('PORT', '8765')}/mcp",
                  token=args.token or "PASTE-TOKEN-FROM-mcp-harness-token-create"))  # fmt: skip
    return 0
