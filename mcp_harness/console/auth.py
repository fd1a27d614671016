"""Who is looking at the console, and whether a form really came from it.

Two ways in, one `Session` out:
- `CodeLogin` (`mcp-harness ui`): the command prints a URL carrying a one-time code; opening it turns
  the code into a session cookie with operator rights, acting as the person's name. A used code is dead.
- `TokenLogin` (`/ui` on the shared HTTP server): a person pastes a bearer token; the cookie holds it
  and it is checked on every request (a revoked token signs the person out at once, and any replica
  can serve any request). Its role decides: `operator` acts, every other role only sees.

The cookie is HttpOnly and SameSite=Strict; POSTs must carry the session's CSRF token and come from
the console's own origin.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import secrets
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from ..config import NAME_RE
from ..errors import Forbidden
from ..service.tokens import TokenService

SESSION_SECONDS = 12 * 3600  #: how long the browser keeps the cookie


@dataclass(frozen=True)
class Session:
    agent: str  #: the person's name: what their actions are recorded under
    role: str  #: `operator` acts; `reader` and `agent` see
    workspace: str | None  #: the one workspace this session may see; None: every workspace
    csrf: str  #: the token every form of this session carries

    @property
    def can_act(self) -> bool:
        return self.role == "operator"

    def may_see(self, workspace: str) -> bool:
        return self.workspace is None or self.workspace == workspace


def person_name(given: str | None) -> str:
    """Who acts from `mcp-harness ui`: `--agent`, else the login name, else `operator`."""
    if given:
        return given
    try:
        name = getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "operator"
    return name if NAME_RE.fullmatch(name or "") else "operator"


def cookie_name(request: Request) -> str:
    """Cookies are shared by every port of a host: name ours after the port, so a `ui` and a shared
    server on one machine keep their own."""
    return f"mcph_console_{request.url.port or (443 if request.url.scheme == 'https' else 80)}"


def set_cookie(request: Request, response: Response, value: str) -> None:
    response.set_cookie(
        cookie_name(request), value, max_age=SESSION_SECONDS, path="/", httponly=True, samesite="strict",
        secure=request.url.scheme == "https",
    )  # fmt: skip


def clear_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(cookie_name(request), path="/", httponly=True, samesite="strict")


class CodeLogin:
    """`mcp-harness ui`: one operator, one code, redeemed once."""

    kind = "code"

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.code = secrets.token_urlsafe(24)
        self._used = False
        self._sessions: dict[str, Session] = {}

    def redeem(self, code: str) -> str | None:
        """A new session id for the right code, the first time only; None otherwise."""
        if self._used or not hmac.compare_digest(code.encode(), self.code.encode()):
            return None
        self._used = True
        sid = secrets.token_urlsafe(32)
        self._sessions[sid] = Session(self.agent, "operator", None, secrets.token_urlsafe(24))
        return sid

    async def session(self, request: Request) -> Session | None:
        return self._sessions.get(request.cookies.get(cookie_name(request), ""))

    def end(self, request: Request) -> None:
        self._sessions.pop(request.cookies.get(cookie_name(request), ""), None)


class TokenLogin:
    """`/ui` on the shared server: the session is the bearer token, checked on every request."""

    kind = "token"

    def __init__(self, tokens: TokenService) -> None:
        self.tokens = tokens

    async def session(self, request: Request) -> Session | None:
        token = request.cookies.get(cookie_name(request))
        return await self.session_for(token) if token else None

    async def session_for(self, token: str) -> Session | None:
        ident = await self.tokens.verify(token)
        if ident is None:
            return None
        csrf = hmac.new(token.encode(), b"mcp-harness console csrf", hashlib.sha256).hexdigest()
        return Session(ident.agent, ident.role, ident.workspace, csrf)

    def end(self, request: Request) -> None:
        """Nothing is kept server-side: clearing the cookie is signing out."""


Login = CodeLogin | TokenLogin


def check_origin(request: Request) -> None:
    """Refuse a POST that a page of another origin sent (browsers always send `Origin` on POST)."""
    origin = request.headers.get("origin")
    host = request.headers.get("host", "")
    if not origin or urlsplit(origin).netloc != host:
        raise Forbidden("this form was not sent from this console's own pages; open the console and try again")


def check_form(request: Request, session: Session, form_csrf: str | None) -> None:
    check_origin(request)
    if not form_csrf or not hmac.compare_digest(form_csrf.encode(), session.csrf.encode()):
        raise Forbidden("this form's security token is missing or stale; reload the page and try again")
