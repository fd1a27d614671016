"""Bearer tokens for the shared HTTP server: shown once, stored as a SHA-256 hash, revocable."""

from __future__ import annotations

import hashlib
import logging
import secrets
from dataclasses import dataclass
from typing import cast

from mcp_harness.access.store import console_sessions
from mcp_harness.access.store import tokens as store
from mcp_harness.base import Identity, Role, ServiceBase, iso
from mcp_harness.config import check_name
from mcp_harness.errors import InvalidArgument, NotFound
from mcp_harness.identity import as_role, check_agent, reserved_agent
from mcp_harness.store.common import now

log = logging.getLogger("mcp_harness.tokens")

TOKEN_PREFIX = "mcph_"


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@dataclass(frozen=True)
class TokenInfo:
    token_id: str
    workspace: str
    agent: str
    role: str
    created_at: str
    revoked_at: str | None


class TokenService(ServiceBase):
    async def create(self, workspace: str, agent: str, role: Role = "agent") -> str:
        """A new token for workspace + agent + role; the only time its text exists outside the client."""
        check_name("workspace", workspace)
        check_agent(agent)
        as_role(role)
        token = TOKEN_PREFIX + secrets.token_urlsafe(32)
        async with self.db.write() as conn:
            await store.insert(
                conn,
                token_hash=token_hash(token),
                token_id="tk_" + secrets.token_hex(6),
                workspace=workspace,
                agent=agent,
                role=role,
                created_at=now(),
            )
        return token

    async def verify(self, token: str) -> Identity | None:
        """The identity a live token names, or None (unknown or revoked: checked on every request)."""
        if not token.startswith(TOKEN_PREFIX) or len(token) > 200:
            return None
        async with self.db.read() as conn:
            row = await store.find(conn, token_hash(token))
        if row is None:
            return None
        if reserved_agent(row.agent):  # made before the name was reserved: it names nobody now
            log.warning(
                "refused token %s: its agent %r is a reserved name (revoke it, make another)", row.token_id, row.agent
            )
            return None
        return Identity(workspace=row.workspace, agent=row.agent, role=cast(Role, row.role))  # a Role when stored

    async def list(self, workspace: str | None = None) -> list[TokenInfo]:
        async with self.db.read() as conn:
            rows = await store.list_all(conn, workspace)
        return [TokenInfo(r.token_id, r.workspace, r.agent, r.role, iso(r.created_at), iso(r.revoked_at)) for r in rows]

    async def revoke(self, token: str | None = None, *, workspace: str | None = None, agent: str | None = None) -> int:
        """Revoke one token (by its text or its id) or all tokens of workspace + agent, and end every
        console session made from them."""
        if token is None and not (workspace and agent):
            raise InvalidArgument("give a token (or token id), or both --workspace and --agent")
        async with self.db.write() as conn:
            if token is not None:
                count = await store.revoke(conn, now(), token_hash=token_hash(token), token_id=token)
            else:
                count = await store.revoke(conn, now(), workspace=workspace, agent=agent)
            await console_sessions.end_revoked(conn)
        if count == 0:
            raise NotFound("no live token matched")
        return count

    async def count_active(self) -> int:
        async with self.db.read() as conn:
            return await store.count_active(conn)
