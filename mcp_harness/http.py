"""The shared HTTP server: streamable HTTP at /mcp (stateless, so replicas need no session
affinity), bearer tokens that fix workspace, agent and role, DNS-rebinding protection, /healthz."""

from __future__ import annotations

import argparse
import ipaddress
import logging

import anyio
import uvicorn
from mcp.server.auth.provider import AccessToken, TokenVerifier
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse

from .config import Settings
from .console import TokenLogin, console_routes
from .errors import HarnessError, InvalidArgument
from .server import create_server
from .service import Harness

log = logging.getLogger("mcp_harness.http")

LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


class HarnessTokenVerifier(TokenVerifier):
    """Looks every bearer token up on every request, so a revocation takes effect at once."""

    def __init__(self, harness: Harness) -> None:
        self.harness = harness

    async def verify_token(self, token: str) -> AccessToken | None:
        try:
            ident = await self.harness.tokens.verify(token)
        except HarnessError:
            log.warning("token check failed: database unavailable")
            return None
        if ident is None:
            return None
        claims = {"workspace": ident.workspace, "agent": ident.agent, "role": ident.role}
        return AccessToken(token=token, client_id=f"{ident.workspace}/{ident.agent}", scopes=[ident.role],
                           claims=claims)  # fmt: skip


def security_settings(
    host: str, port: int, extra_hosts: list[str], extra_origins: list[str]
) -> TransportSecuritySettings:
    """Host and Origin checks against DNS rebinding. Loopback names are always allowed on a loopback
    bind; any other bind allows only its own address and the names given with --allowed-host."""
    names = list(LOOPBACK_NAMES) if is_loopback(host) else ([host] if host not in ("0.0.0.0", "::") else [])
    hosts, origins = [], []
    for name in names + list(extra_hosts):
        hosts += [name, f"{name}:{port}"]
        origins += [f"http://{name}:{port}", f"https://{name}:{port}", f"http://{name}", f"https://{name}"]
    origins += list(extra_origins)
    return TransportSecuritySettings(enable_dns_rebinding_protection=True, allowed_hosts=hosts, allowed_origins=origins)


def build_app(harness: Harness, settings: Settings, host: str, port: int, extra_hosts: list[str] | None = None,
              extra_origins: list[str] | None = None) -> Starlette:  # fmt: skip
    """The ASGI app for an already-open harness (tests mount it in their own uvicorn)."""
    base = f"http://{'localhost' if is_loopback(host) else host}:{port}"
    server = create_server(
        settings, None, harness=harness, token_verifier=HarnessTokenVerifier(harness),
        # Tokens are opaque and scoped to one workspace by our own table, not audience-bound JWTs.
        auth=AuthSettings(issuer_url=base, resource_server_url=f"{base}/mcp", validate_token_resource=False),
    )  # fmt: skip

    @server.custom_route("/healthz", methods=["GET"])
    async def healthz(_request: Request) -> JSONResponse:
        try:
            await harness.db.ping()
        except HarnessError:
            return JSONResponse({"status": "unavailable"}, status_code=503)
        return JSONResponse({"status": "ok"})

    security = security_settings(host, port, extra_hosts or [], extra_origins or [])
    app = server.streamable_http_app(
        stateless_http=True,
        json_response=False,  # SSE responses still carry progress notifications
        transport_security=security,
        host=host,
    )
    app.router.routes.extend(console_routes(harness, TokenLogin(harness.tokens), allowed_hosts=security.allowed_hosts,
                                            metrics_open=is_loopback(host)))  # fmt: skip
    return app


def serve_http(settings: Settings, args: argparse.Namespace) -> int:
    """`mcp-harness serve --transport http`: refuses an exposed bind that no token could use."""

    async def main() -> int:
        async with Harness.open(settings) as harness:
            if not is_loopback(args.host):
                if await harness.tokens.count_active() == 0:
                    raise InvalidArgument(
                        f"refusing to listen on {args.host}: no token exists, so nobody could use this server "
                        "and nothing would protect it. Create one first: mcp-harness token create "
                        "--workspace W --agent A"
                    )
                if args.host in ("0.0.0.0", "::") and not args.allowed_host:
                    raise InvalidArgument(
                        f"listening on {args.host} needs --allowed-host NAME (the host name clients use) "
                        "for the DNS-rebinding Host check"
                    )
            app = build_app(harness, settings, args.host, args.port, args.allowed_host or [],
                            args.allowed_origin or [])  # fmt: skip
            config = uvicorn.Config(app, host=args.host, port=args.port, log_level="warning", lifespan="on")
            log.warning("mcp-harness serving streamable HTTP on http://%s:%s/mcp", args.host, args.port)
            await uvicorn.Server(config).serve()
        return 0

    return anyio.run(main)
