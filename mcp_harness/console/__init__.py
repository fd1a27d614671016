"""The operator console: a live web view of a workspace's board, tasks, dependencies, timeline,
threads and agents, with the operator's actions. Served by `mcp-harness ui` (one machine, a one-time
login code) and by the shared HTTP server at `/ui` (sign-in with a bearer token)."""

from __future__ import annotations

from starlette.routing import Mount, Route
from starlette.types import ASGIApp

from ..metrics import metrics_endpoint
from ..service import Harness
from .app import Console, build
from .auth import CodeLogin, Login, TokenLogin, person_name

__all__ = ["CodeLogin", "Console", "TokenLogin", "console_routes", "person_name"]


def console_routes(
    harness: Harness, login: Login, *, allowed_hosts: list[str], metrics_open: bool, workspace: str | None = None
) -> list[Route | Mount]:
    """`/ui` (the console) and `/metrics`, to add to an app's routes."""
    app: ASGIApp = build(Console(harness, login, base="/ui", workspace=workspace), allowed_hosts)
    return [
        Mount("/ui", app=app),
        Route("/metrics", metrics_endpoint(harness, open_access=metrics_open), methods=["GET"]),
    ]
