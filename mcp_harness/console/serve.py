"""`mcp-harness ui`: the console for this machine's database, on loopback, behind a one-time login
code printed (with the URL to open) alone on the last line of stdout."""

from __future__ import annotations

import argparse
import logging
import socket
import sys

import anyio
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import RedirectResponse
from starlette.routing import Route

from mcp_harness.config import Settings, check_name
from mcp_harness.console.auth import CodeLogin, person_name
from mcp_harness.console.routes import console_routes
from mcp_harness.errors import InvalidArgument
from mcp_harness.identity import check_agent
from mcp_harness.service import Harness

log = logging.getLogger("mcp_harness.console")
HOST = "127.0.0.1"


def loopback_hosts(port: int) -> list[str]:
    return [f"{name}:{port}" for name in ("127.0.0.1", "localhost", "[::1]")] + ["127.0.0.1", "localhost"]


def serve_ui(settings: Settings, args: argparse.Namespace) -> int:
    agent = check_agent(person_name(args.agent))
    if args.workspace:
        check_name("workspace", args.workspace)
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((HOST, args.port))
    except OSError as exc:
        sock.close()
        raise InvalidArgument(f"cannot listen on {HOST}:{args.port} ({exc.strerror}); choose another --port") from None
    port = sock.getsockname()[1]
    login = CodeLogin(agent)

    async def main() -> int:
        async with Harness.open(settings) as harness:

            async def root(_request: Request) -> RedirectResponse:
                return RedirectResponse("/ui/", status_code=303)

            routes = console_routes(
                harness, login, allowed_hosts=loopback_hosts(port), metrics_open=True, workspace=args.workspace
            )
            app = Starlette(routes=[Route("/", root), *routes])
            config = uvicorn.Config(app, log_level="warning", lifespan="off", timeout_graceful_shutdown=2)
            server = uvicorn.Server(config)
            async with anyio.create_task_group() as tg:
                tg.start_soon(server.serve, [sock])
                while not server.started:
                    if server.should_exit:
                        return 1
                    await anyio.sleep(0.02)
                print(
                    f"mcp-harness console, acting as {agent!r} (operator). Open this URL in a browser (its login "
                    "code works once); Ctrl-C stops the console:"
                )
                print(f"http://{HOST}:{port}/ui/login?code={login.code}", flush=True)
        return 0

    try:
        return anyio.run(main)
    finally:
        sock.close()
        sys.stdout.flush()
