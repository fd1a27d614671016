"""The shared HTTP server: streamable HTTP at /mcp (stateless, so replicas need no session
affinity), bearer tokens that fix workspace, agent and role, DNS-rebinding protection, /healthz."""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import re
import sys

import anyio
import uvicorn
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from pydantic import AnyHttpUrl
from starlette.applications import Starlette
from starlette.authentication import AuthenticationError
from starlette.requests import HTTPConnection, Request
from starlette.responses import JSONResponse

from mcp_harness.arguments import mark_unpaired_surrogates
from mcp_harness.config import Settings
from mcp_harness.console.auth import TokenLogin
from mcp_harness.console.routes import console_routes
from mcp_harness.errors import HarnessError, InvalidArgument
from mcp_harness.mcp.binds import Bind, resolve_bind
from mcp_harness.mcp.connections import protocol_with_header_timeout, quiet_accept_errors, raise_open_files_limit
from mcp_harness.mcp.sdk import lenient_tool_arguments, on_authentication_error
from mcp_harness.mcp.server import create_server
from mcp_harness.service import Harness

log = logging.getLogger("mcp_harness.mcp.http")

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")
#: what a client that could not be authenticated because the database is down is told to wait
RETRY_AFTER_SECONDS = 5


class TokenCheckUnavailable(AuthenticationError):
    """The token could not be checked: the client hears 503 and keeps its credentials (a 401 tells
    it to throw them away)."""


def token_check_unavailable(_conn: HTTPConnection, _exc: Exception) -> JSONResponse:
    return JSONResponse(
        {
            "error": "temporarily_unavailable",
            "error_description": "the server cannot check tokens right now (its database is unavailable)",
        },
        status_code=503,
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


#: how long a thread may hold the interpreter while another waits for it (Python's default is 5 ms): the
#: console renders pages on a worker thread, and each time the event loop that answers the agents wakes
#: up (a request, a reply from PostgreSQL) it waits up to this long for that thread to let go
SWITCH_SECONDS = 0.001


class HarnessTokenVerifier(TokenVerifier):
    """Looks every bearer token up on every request, so a revocation takes effect at once."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            ident = await self.harness.tokens.verify(token)
        except HarnessError as exc:
            log.warning("token check failed: %s", exc.message)
            raise TokenCheckUnavailable(exc.message) from exc
        if ident is None:
            return None
        claims = {"workspace": ident.workspace, "agent": ident.agent, "role": ident.role}
        return AccessToken(
            token=token, client_id=f"{ident.workspace}/{ident.agent}", scopes=[ident.role], claims=claims
        )


def split_host(value: str) -> tuple[str, str | None]:
    """`NAME`, `NAME:PORT`, `[V6]` or `[V6]:PORT` -> (name, port or None)."""
    if value.startswith("["):
        name, _, rest = value.partition("]")
        return name + "]", rest[1:] if rest.startswith(":") and rest[1:] else None
    if value.count(":") == 1:
        name, port = value.split(":")
        return name, port or None
    return value, None


def security_settings(
    host: str, port: int, extra_hosts: list[str], extra_origins: list[str]
) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding, which is about the name, not the port. On a
    loopback bind, loopback names are allowed on any port (a reverse proxy or a port forward in front
    is normal); any other bind allows its own address on its port. `--allowed-host NAME` allows NAME
    on any port, `NAME:PORT` exactly that."""
    bind = resolve_bind(host)
    names: list[tuple[str, str]] = []  # (name, "*" or a port)
    if bind.loopback:
        names += [(name, "*") for name in LOOPBACK_NAMES]
    elif not bind.unspecified:
        names.append((bind.url_host, str(port)))
    for extra in extra_hosts:
        name, only = split_host(extra)
        names.append((name, only or "*"))
    hosts, origins = [], []
    for name, on in names:
        hosts.append(f"{name}:{on}")
        origins += [f"http://{name}:{on}", f"https://{name}:{on}"]
        if on == "*" or name == bind.url_host:
            hosts.append(name)  # no port in the Host header: the scheme's default port
            origins += [f"http://{name}", f"https://{name}"]
    origins += list(extra_origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def build_app(
    harness: Harness,
    settings: Settings,
    host: str,
    port: int,
    extra_hosts: list[str] | None = None,
    extra_origins: list[str] | None = None,
) -> Starlette:
    """The ASGI app for an already-open harness (tests mount it in their own uvicorn)."""
    base = public_base(resolve_bind(host), port, extra_hosts or [])
    server = create_server(
        settings,
        None,
        harness=harness,
        token_verifier=HarnessTokenVerifier(harness),
        # Tokens are opaque and scoped to one workspace by our own table, not audience-bound JWTs.
        auth=AuthSettings(
            issuer_url=AnyHttpUrl(base), resource_server_url=AnyHttpUrl(f"{base}/mcp"), validate_token_resource=False
        ),
    )

    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(_request: Request) -> JSONResponse:
        try:
            await harness.ping()
        except HarnessError as exc:  # unreachable, read-only, damaged: the reason says which
            return JSONResponse({"status": "unavailable", "reason": exc.message}, status_code=503)
        return JSONResponse({"status": "ok"})

    @server.custom_route("/whoami", methods=["GET"])
    async def whoami(request: Request) -> JSONResponse:
        """Who the bearer token names: `init --url` writes that workspace into a project's files."""
        token = getattr(request.scope.get("user"), "access_token", None)
        claims = getattr(token, "claims", None) or {}
        if not claims.get("workspace"):
            return JSONResponse({"error": "send a valid bearer token"}, status_code=401)
        return JSONResponse({name: claims[name] for name in ("workspace", "agent", "role")})

    security = security_settings(host, port, extra_hosts or [], extra_origins or [])
    app = server.streamable_http_app(
        stateless_http=True,
        json_response=False,  # SSE responses still carry progress notifications
        transport_security=security,
        host=host,
    )
    on_authentication_error(app, token_check_unavailable)  # a 503, where the SDK's middleware answers 400
    lenient_tool_arguments(app, "/mcp", mark_unpaired_surrogates)
    login = TokenLogin(harness.console_sessions)  # console sign-ins: server-side sessions bound to a token
    app.router.routes.extend(
        console_routes(harness, login, allowed_hosts=security.allowed_hosts, metrics_open=resolve_bind(host).loopback)
    )
    return app


def public_base(bind: Bind, port: int, extra_hosts: list[str]) -> str:
    """The URL clients reach the server by, which the OAuth metadata advertises: `localhost` for a
    loopback bind, else the first --allowed-host (the name clients use), else the bound address."""
    if bind.loopback:
        return f"http://localhost:{port}"
    name = extra_hosts[0] if extra_hosts else ("localhost" if bind.unspecified else bind.url_host)
    has_port = re.fullmatch(r"(\[[^\]]*\]|[^:\[\]]+):\d+", name) is not None
    return f"http://{name}" if has_port else f"http://{name}:{port}"


def serve_http(settings: Settings, args: argparse.Namespace) -> int:
    """`mcp-harness serve --transport http`: refuses an exposed bind that no token could use."""
    raise_open_files_limit()
    bind = resolve_bind(args.host)
    sys.setswitchinterval(SWITCH_SECONDS)

    async def main() -> int:
        quiet_accept_errors(asyncio.get_running_loop())
        async with Harness.open(settings) as harness:
            if not bind.loopback:
                if await harness.tokens.count_active() == 0:
                    raise InvalidArgument(
                        f"refusing to listen on {args.host}: no token exists, so nobody could use this server "
                        "and nothing would protect it. Create one first: mcp-harness token create "
                        "--workspace W --agent A"
                    )
                if bind.unspecified and not args.allowed_host:
                    raise InvalidArgument(
                        f"listening on {args.host or '(all interfaces)'} (every interface) needs --allowed-host "
                        "NAME (the host name clients use) for the DNS-rebinding Host check"
                    )
            app = build_app(harness, settings, args.host, args.port, args.allowed_host or [], args.allowed_origin or [])
            config = uvicorn.Config(
                app,
                host=args.host.strip("[]"),
                port=args.port,
                log_level="warning",
                lifespan="on",
                # no limit_concurrency: idle connections must never make real requests get 503s
                http=protocol_with_header_timeout(settings.header_timeout_seconds),
            )
            if not log.isEnabledFor(logging.INFO) and not os.environ.get("MCP_HARNESS_LOG_LEVEL"):
                log.setLevel(logging.INFO)  # the start line is news, not a warning, yet a person must see it
            base = f"http://{bind.url_host}:{args.port}"
            log.info("mcp-harness serving MCP on %s/mcp; console %s/ui, metrics %s/metrics", base, base, base)
            await uvicorn.Server(config).serve()
        return 0

    return anyio.run(main)
