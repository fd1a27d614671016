"""Who is looking at the console, and whether a form really came from it.

Two ways in, one `Session` out:
- `CodeLogin` (`mcp-harness ui`): the command prints a URL carrying a one-time code; opening it turns
  the code into a session cookie with operator rights, acting as the person's name. A used code is dead.
- `TokenLogin` (`/ui` on the shared HTTP server): a person pastes a bearer token; the server makes an
  opaque session bound to that token (access/console_sessions.py) and the cookie holds only the
  session id, never the token. The session is checked on every request (any replica can serve any
  request); signing out or revoking the token ends it at once. The token's role decides: `operator`
  acts, every other role only sees.

The cookie is HttpOnly and SameSite=Strict; POSTs must carry the session's CSRF token and come from
the console's own origin.
"""

from __future__ import annotations

import getpass
import hashlib
import hmac
import secrets
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from starlette.requests import Request
from starlette.responses import Response

from mcp_harness.access.console_sessions import SESSION_SECONDS, ConsoleSessionService
from mcp_harness.config import NAME_RE
from mcp_harness.errors import Forbidden, HarnessError
from mcp_harness.identity import reserved_agent

RECHECK_SECONDS = 0.4  #: an open event stream's session is looked up again at most this often


@dataclass(frozen=True)
class Session:
    agent: str  #: the person's name: what their actions are recorded under
    role: str  #: `operator` acts; `reader` and `agent` see
    workspace: str | None  #: the one workspace this session may see; None: every workspace
    csrf: str  #: the token every form of this session carries
    key: str = field(default="", repr=False)  #: what open event streams are counted by (the token's hash)
    sid: str = field(default="", repr=False)  #: the session id (the cookie)

    @property
    def can_act(self) -> bool:
        return self.role == "operator"

    def may_see(self, workspace: str) -> bool:
        return self.workspace is None or self.workspace == workspace


def person_name(given: str | None) -> str:
    """Who acts from `mcp-harness ui`: `--agent`, else the login name (unless it is not a name or a reserved
    one, such as CI's `runner`), else `operator`."""
    if given:
        return given
    try:
        name = getpass.getuser()
    except (OSError, KeyError, ImportError):
        return "operator"
    return name if NAME_RE.fullmatch(name or "") and not reserved_agent(name) else "operator"


def cookie_name(request: Request) -> str:
    """Cookies are shared by every port of a host: name ours after the port, so a `ui` and a shared
    server on one machine keep their own."""
    return f"mcph_console_{request.url.port or (443 if request.url.scheme == 'https' else 80)}"


def set_cookie(request: Request, response: Response, value: str) -> None:
    response.set_cookie(
        cookie_name(request),
        value,
        max_age=SESSION_SECONDS,
        path="/",
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
    )


def clear_cookie(request: Request, response: Response) -> None:
    response.delete_cookie(cookie_name(request), path="/", httponly=True, samesite="strict")


class CodeLogin:
    """`mcp-harness ui`: one operator, one code, redeemed once."""

    kind = "code"

    def __init__(self, agent: str) -> None:
        self.agent = agent
        self.code = secrets.token_urlsafe(24)
        self._used = False
        self._sessions: dict[str, tuple[Session, float]] = {}  #: id -> the session and when it expires

    def redeem(self, code: str) -> str | None:
        """A new session id for the right code, the first time only; None otherwise."""
        if self._used or not hmac.compare_digest(code.encode(), self.code.encode()):
            return None
        self._used = True
        sid = secrets.token_urlsafe(32)
        session = Session(self.agent, "operator", None, secrets.token_urlsafe(24), key=sid, sid=sid)
        self._sessions[sid] = (session, time.monotonic() + SESSION_SECONDS)
        return sid

    async def session(self, request: Request) -> Session | None:
        return self._find(request.cookies.get(cookie_name(request), ""))

    def _find(self, sid: str) -> Session | None:
        found = self._sessions.get(sid)
        if found is None or found[1] <= time.monotonic():
            return None
        return found[0]

    async def alive(self, session: Session) -> bool:
        """Whether an open event stream's session still holds (not signed out, not expired)."""
        return self._find(session.sid) is not None

    async def end(self, request: Request) -> None:
        self._sessions.pop(request.cookies.get(cookie_name(request), ""), None)


class TokenLogin:
    """`/ui` on the shared server: a bearer token, pasted once, becomes a server-side session."""

    kind = "token"

    def __init__(self, sessions: ConsoleSessionService) -> None:
        self.sessions = sessions
        self._checked: dict[str, tuple[float, bool]] = {}  #: session id -> (when looked up, alive)

    async def start(self, token: str) -> str | None:
        """A new session id for a live token, for the cookie; None for an unknown or revoked token."""
        return await self.sessions.start(token)

    async def session(self, request: Request) -> Session | None:
        sid = request.cookies.get(cookie_name(request))
        return await self.session_for(sid) if sid else None

    async def session_for(self, sid: str) -> Session | None:
        found = await self.sessions.find(sid)
        if found is None:
            return None
        ident = found.ident
        csrf = hmac.new(sid.encode(), b"mcp-harness console csrf", hashlib.sha256).hexdigest()
        return Session(ident.agent, ident.role, ident.workspace, csrf, key=found.token_key, sid=sid)

    async def alive(self, session: Session) -> bool:
        """Whether an open event stream's session still holds (not signed out, not expired, its token
        not revoked): looked up again, shared by the streams of one session, at most every
        `RECHECK_SECONDS`."""
        clock = time.monotonic()
        checked = self._checked.get(session.sid)
        if checked is not None and clock - checked[0] < RECHECK_SECONDS:
            return checked[1]
        if len(self._checked) > 10_000:
            self._checked.clear()
        try:
            alive = await self.sessions.find(session.sid) is not None
        except HarnessError:  # the database is away: no page can change meanwhile; look again soon
            return True
        self._checked[session.sid] = (clock, alive)
        return alive

    async def end(self, request: Request) -> None:
        """Sign out: the session ends on the server (on every replica), not only in this browser."""
        sid = request.cookies.get(cookie_name(request))
        if sid:
            await self.sessions.end(sid)
            self._checked.pop(sid, None)


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
