"""`mcp-harness serve`: the MCP server over stdio (one agent) or HTTP (shared, bearer tokens)."""

from __future__ import annotations

import argparse

from ..config import Settings
from .common import identity


def cmd_serve(args: argparse.Namespace) -> int:
    settings = Settings.from_env(args.db)
    if args.transport == "stdio":
        from ..server import create_server

        server = create_server(settings, identity(args, with_agent=True))
        server.run("stdio")
        return 0
    from ..http import serve_http

    return serve_http(settings, args)
