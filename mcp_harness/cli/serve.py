"""`mcp-harness serve`: the MCP server over stdio (one agent) or HTTP (shared, bearer tokens)."""

from __future__ import annotations

import argparse
import logging
import os
import sys

from mcp_harness.cli.common import identity
from mcp_harness.config import Settings


def cmd_serve(args: argparse.Namespace) -> int:
    settings = Settings.from_env(args.db)
    if args.transport == "stdio":
        from mcp_harness.identity import Identity, leases_kept, stdio_agent
        from mcp_harness.mcp.server import create_server
        from mcp_harness.sessions import forget, record, this_process

        ident = identity(args, with_agent=True)
        # one identity per session: A:<session> when the client names a session
        agent = stdio_agent(ident.agent, no_session=args.no_session)
        ident = Identity(workspace=ident.workspace, agent=agent, role=ident.role)
        keep = args.keep_leases or leases_kept()
        if not keep:  # its leases also end when the process is gone without a word (SIGKILL)
            ident = Identity(workspace=ident.workspace, agent=ident.agent, role=ident.role, process=this_process())
        server = create_server(settings, ident, end_leases=not keep)
        if sys.stdin is not None and sys.stdin.isatty():  # a person typed it; a client's stdin is a pipe
            print(
                f"mcp-harness: serving MCP on stdio for workspace {ident.workspace!r}; an MCP client normally "
                'starts this command (docs/setup.md, "Connect a client"); Ctrl-C stops',
                file=sys.stderr,
            )
        recorded = record(ident.workspace, ident.agent)  # for this client's hooks and commit guard
        try:
            server.run("stdio")
        finally:
            forget(recorded)
        leave_now()
    from mcp_harness.mcp.http import serve_http

    return serve_http(settings, args)


def leave_now() -> None:
    """End a stdio server that has finished cleanly (the client closed stdin, the database is closed)
    without the interpreter's teardown: freeing every module and object one by one took most of the
    time between stdin closing and the process ending, and a client waits for that on every session.
    Output is flushed and logging shut down first; nothing else is left to do."""
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os._exit(0)
