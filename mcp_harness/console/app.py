"""The console's Starlette app: routes, templates (autoescaped), security headers, Host checks, and
the helpers every page shares (who is asking, which workspace, how errors are shown)."""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from functools import wraps
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import anyio
import jinja2
from markupsafe import Markup
from starlette.datastructures import FormData
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from mcp_harness import __version__
from mcp_harness.console.auth import Login, Session
from mcp_harness.errors import Forbidden, HarnessError, InvalidArgument
from mcp_harness.identity import ROLES
from mcp_harness.service import Harness, Identity
from mcp_harness.tasks.rules import LOOKS, PERSON_ACTIONS, RULES

log = logging.getLogger("mcp_harness.console")
HERE = Path(__file__).parent
#: no inline script or style at all; everything from this origin; nothing from anywhere else
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"x-frame-options", b"DENY"),
    (b"referrer-policy", b"same-origin"),  # not no-referrer: that would make a form's Origin "null"
]
#: how statuses read on the page
LABELS = {status: look.label for status, look in LOOKS.items()}
#: the HTTP status of each contract error a page or an action meets: what the person asked for is refused
#: (4xx, with the message), the database is away (503), or something unexpected happened (500)
STATUS = {
    "invalid_argument": 400,
    "forbidden": 403,
    "not_found": 404,
    "version_conflict": 409,
    "lease_lost": 409,
    "task_conflict": 409,
    "dependency_error": 409,
    "too_large": 413,
    "schema_violation": 422,
    "unavailable": 503,
    "internal": 500,
}


def status_of(exc: HarnessError) -> int:
    """The HTTP status a console answer gives `exc` (every code has one; an unknown one is unexpected)."""
    return STATUS.get(exc.code, 500)


MAX_FORM_BYTES = 1024 * 1024  #: a console form (a comment, a reason, a token) is far smaller


async def read_form(request: Request) -> FormData:
    """The request's form, refused with a one-line 400 when it is larger than any console form or
    malformed (Starlette reads an URL-encoded body of any size into memory, and raises a bare error)."""
    length = request.headers.get("content-length", "")
    if not length.isdigit() or int(length) > MAX_FORM_BYTES:
        raise InvalidArgument(f"a console form must say its length and be at most {MAX_FORM_BYTES // 1024} KB")
    try:
        return await request.form(max_files=0, max_fields=50, max_part_size=MAX_FORM_BYTES)
    except HTTPException as exc:
        raise InvalidArgument(f"this form could not be read: {' '.join(str(exc.detail).split())[:200]}") from None


class Redirect(Exception):
    def __init__(self, url: str) -> None:
        super().__init__(url)
        self.url = url


class Console:
    """One console: the harness it reads, how people sign in, and where it is mounted."""

    def __init__(self, harness: Harness, login: Login, *, base: str = "/ui", workspace: str | None = None) -> None:
        self.harness = harness
        self.login = login
        self.base = base
        self.default_workspace = workspace
        #: pages render one at a time on a thread of their own: however many people load pages at once,
        #: one thread, not one each, takes turns for the interpreter with the event loop that answers agents
        self.renders = anyio.CapacityLimiter(1)
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(HERE / "templates"),
            autoescape=True,  # everything agents wrote (titles, summaries, states) is shown as text
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
        )
        self.env.globals.update(url=self.url, static=self.static, live_attrs=live_attrs, labels=LABELS)
        #: each operator action's rule, by its name: the form asks for the argument the rule records
        self.env.globals["action_rules"] = {name: RULES[action] for name, action in PERSON_ACTIONS.items()}
        self.env.filters.update(ago=ago, left=left, when=when, pretty=pretty, duration=_span, lasted=lasted, usd=usd)

    def url(self, path: str, **params: Any) -> str:
        query = urlencode({k: v for k, v in params.items() if v is not None and v != ""})
        return f"{self.base}{path}" + (f"?{query}" if query else "")

    def static(self, name: str) -> str:
        return f"{self.base}/static/{name}?v={__version__}"

    def render(self, request: Request, name: str, status: int = 200, **context: Any) -> Page:
        """A page; for htmx's live refresh (`HX-Request`) only its `live` block. It is rendered when sent,
        in a worker thread: a big page never holds up the event loop (and every agent's call on it)."""
        context = {
            "request": request,
            "now": when_now(),
            "tab": None,
            "workspace": None,
            "session": None,
            "title": "",
            "needs": None,
            **context,
        }
        return Page(self, request, name, status, context)

    def render_now(self, request: Request, name: str, context: dict[str, Any]) -> str:
        template = self.env.get_template(name)
        if request.headers.get("hx-request") and "live" in template.blocks:
            return "".join(template.blocks["live"](template.new_context(context)))
        return template.render(context)

    async def needs(self, workspace: str) -> Any:
        """What needs a person in `workspace` (the bar at the top of every page); None if it cannot be read."""
        try:
            return await self.harness.console.needs(workspace)
        except HarnessError:
            return None

    async def session(self, request: Request) -> Session:
        session = await self.login.session(request)
        if session is None:
            raise Redirect(self.url("/login"))
        return session

    async def viewer(self, request: Request) -> tuple[Session, Identity]:
        """The session and the identity it reads a workspace (`?w=`) as; without one, the picker."""
        session = await self.session(request)
        workspace = request.query_params.get("w") or session.workspace or self.default_workspace  # `ui --workspace`
        if not workspace:
            raise Redirect(self.url("/"))
        if not session.may_see(workspace):
            raise Forbidden(f"this sign-in may see workspace {session.workspace!r} only")
        return session, Identity(workspace=workspace, agent=session.agent, role=_role(session))


class Page(HTMLResponse):
    """A template response rendered off the event loop: `finish()` fetches what every page shows (the
    "needs you" bar) and renders in a worker thread; sending an unfinished one finishes it first."""

    def __init__(self, console: Console, request: Request, name: str, status: int, context: dict[str, Any]) -> None:
        super().__init__(b"", status_code=status, headers={"cache-control": "no-store"})
        self.console, self.request, self.name, self.context = console, request, name, context
        self.finished = False

    async def finish(self) -> None:
        if self.finished:
            return
        context = self.context
        full = not self.request.headers.get("hx-request")
        if full and context.get("session") is not None and context.get("workspace") and context["needs"] is None:
            context["needs"] = await self.console.needs(context["workspace"])
        render = self.console.render_now
        body = await anyio.to_thread.run_sync(render, self.request, self.name, context, limiter=self.console.renders)
        self.body = self.render(body)
        self.headers["content-length"] = str(len(self.body))
        self.finished = True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.finish()
        await super().__call__(scope, receive, send)


def _role(session: Session) -> Any:
    return session.role if session.role in ROLES else "reader"


Handler = Callable[[Console, Request], Awaitable[Response]]


def page(fn: Handler) -> Handler:
    """Redirects and contract errors become responses a person can read; nothing else leaks."""

    @wraps(fn)
    async def handle(console: Console, request: Request) -> Response:
        response = await respond(console, request)
        if isinstance(response, Page):
            try:
                await response.finish()
            except Exception as exc:  # noqa: BLE001 - the boundary, as below
                incident = secrets.token_hex(6)
                log.error("internal error %s rendering console page %s", incident, request.url.path, exc_info=exc)
                return PlainTextResponse(
                    f"An unexpected error happened (incident {incident}); the server log has the details.",
                    status_code=500,
                )
        return response

    async def respond(console: Console, request: Request) -> Response:
        try:
            return await fn(console, request)
        except Redirect as redirect:
            if request.headers.get("hx-request"):  # htmx follows this with a full page load
                return Response(status_code=204, headers={"hx-redirect": redirect.url})
            return RedirectResponse(redirect.url, status_code=303)
        except HarnessError as exc:
            status = status_of(exc)
            session = await console.login.session(request)
            back = request.query_params.get("w") if not isinstance(exc, Forbidden) else None
            return console.render(
                request, "message.html", status, session=session, title="Not possible", message=exc.message, back=back
            )
        except HTTPException as exc:  # Starlette refused the request itself (a form too large, malformed)
            if exc.status_code >= 500:
                raise
            detail = " ".join(str(exc.detail).split())[:200]
            return console.render(
                request,
                "message.html",
                exc.status_code,
                title="Not possible",
                back=None,
                message=f"This request could not be read: {detail}.",
            )
        except Exception as exc:  # noqa: BLE001 - the boundary: a person sees an incident id, the log the rest
            incident = secrets.token_hex(6)
            log.error("internal error %s in console page %s", incident, request.url.path, exc_info=exc)
            return console.render(
                request,
                "message.html",
                500,
                title="Something went wrong",
                back=None,
                message=f"An unexpected error happened (incident {incident}); the server log has the details.",
            )

    return handle


def live_attrs(request: Request, every: int | None = None) -> Markup:
    """The attributes of a page's live part: htmx re-fetches the page (its `live` block) on `change`,
    and also `every` so many seconds for a page that shows what the change feed does not follow (a
    running session's turns and cost)."""
    path = request.url.path + (f"?{request.url.query}" if request.url.query else "")
    trigger = "sse:change" + (f", every {int(every)}s" if every else "")
    return Markup('id="live" hx-get="{}" hx-trigger="{}" hx-swap="outerHTML"').format(path, trigger)


def ago(iso: str | None) -> str:
    """`3m ago` for an ISO time (the browser keeps it current)."""
    if not iso:
        return "never"
    return f"{_span(time.time() - _ts(iso))} ago"


def left(iso: str | None) -> str:
    """`4m 12s left`, or `overdue 30s`, for a deadline."""
    if not iso:
        return ""
    seconds = _ts(iso) - time.time()
    return f"{_span(seconds)} left" if seconds >= 0 else f"overdue {_span(-seconds)}"


def lasted(start: str, end: str | None) -> str:
    """How long from `start` to `end` (to now while `end` is None): `4m 12s`."""
    return _span(max(0.0, (_ts(end) if end else time.time()) - _ts(start)))


def usd(cost: float | None) -> str:
    """A cost as the agent reported it; `unknown` when it reported none (never shown as 0)."""
    return "unknown" if cost is None else f"${cost:.4f}"


def when(iso: str | None) -> str:
    return iso[:19].replace("T", " ") + " UTC" if iso else ""


def when_now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def pretty(value: Any) -> str:
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def _span(seconds: float) -> str:
    s = int(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m {s % 60}s"
    if s < 86400:
        return f"{s // 3600}h {s % 3600 // 60}m"
    return f"{s // 86400}d {s % 86400 // 3600}h"


class Guard:
    """Every console response: the security headers; every request: a Host this server answers to
    (DNS rebinding: a page elsewhere must not reach the console through a name it controls)."""

    def __init__(self, app: ASGIApp, allowed_hosts: list[str]) -> None:
        self.app = app
        self.allowed = set(allowed_hosts)

    def host_allowed(self, host: str) -> bool:
        name = host.rsplit(":", 1)[0] if not host.endswith("]") else host
        return host in self.allowed or f"{name}:*" in self.allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        host = dict(scope["headers"]).get(b"host", b"").decode("latin-1")
        if not self.host_allowed(host):
            response = PlainTextResponse("Invalid Host header", status_code=421)
            await response(scope, receive, send)
            return

        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)
