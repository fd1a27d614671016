"""The operator console: a live web view of a workspace's board, tasks, dependencies, timeline,
threads and agents, with the operator's actions. Served by `mcp-harness ui` (one machine, a one-time
login code) and by the shared HTTP server at `/ui` (sign-in with a bearer token)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Mount, Route, request_response
from starlette.staticfiles import StaticFiles
from starlette.types import ASGIApp

from mcp_harness.console import actions, live, views
from mcp_harness.console.app import HERE, Console, Guard, Handler
from mcp_harness.console.auth import CodeLogin, Login, TokenLogin, person_name
from mcp_harness.mcp.metrics import metrics_endpoint
from mcp_harness.service import Harness

__all__ = ["CodeLogin", "Console", "TokenLogin", "console_routes", "person_name"]


def console_routes(
    harness: Harness, login: Login, *, allowed_hosts: list[str], metrics_open: bool, workspace: str | None = None
) -> list[Route | Mount]:
    """`/ui` (the console) and `/metrics`, to add to an app's routes; both answer only the Hosts this
    server answers to (DNS rebinding)."""
    app: ASGIApp = build(Console(harness, login, base="/ui", workspace=workspace), allowed_hosts)
    metrics = Guard(request_response(metrics_endpoint(harness, open_access=metrics_open)), allowed_hosts)
    return [Mount("/ui", app=app), Route("/metrics", metrics, methods=["GET"])]


def build(console: Console, allowed_hosts: list[str]) -> ASGIApp:
    """The console as an ASGI app, to be mounted at `console.base`."""

    def bind(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
        async def endpoint(request: Request) -> Response:
            return await fn(console, request)

        return endpoint

    routes = [
        Route("/", bind(views.home)),
        Route("/login", bind(actions.login_page), methods=["GET"]),
        Route("/login", bind(actions.login), methods=["POST"]),
        Route("/logout", bind(actions.logout), methods=["POST"]),
        Route("/board", bind(views.board)),
        Route("/task", bind(views.task)),
        Route("/task/{action}", bind(actions.act), methods=["POST"]),
        Route("/graph", bind(views.graph)),
        Route("/log", bind(views.timeline)),
        Route("/threads", bind(views.threads)),
        Route("/thread", bind(views.thread)),
        Route("/thread/fork", bind(actions.fork), methods=["POST"]),
        Route("/agents", bind(views.agents)),
        Route("/inbox", bind(views.inbox)),
        Route("/messages/send", bind(actions.send_message), methods=["POST"]),
        Route("/messages/ack", bind(actions.ack_message), methods=["POST"]),
        Route("/sessions", bind(views.sessions)),
        Route("/sessions/stop", bind(actions.stop_session), methods=["POST"]),
        Route("/needs", bind(views.needs)),
        Route("/stuck", bind(views.stuck)),
        Route("/pace", bind(views.pace)),
        Route("/tasks", bind(views.table)),
        Route("/events", bind(live.events)),
        Mount("/static", StaticFiles(directory=HERE / "static"), name="static"),
    ]
    return Guard(Starlette(routes=routes), allowed_hosts)
