"""Console sessions of the shared server's `/ui`: a person signs in with a bearer token once, and the
browser keeps an opaque session id instead of the token (a cookie reaches every port of a host name,
so a token in it would reach every other service there, and it works on `/mcp`).

A session has a random id (only its SHA-256 is stored), an expiry, and the token it was made from:
signing out ends it, revoking the token ends every session made from it. Sessions live in the
database, so any replica of the shared server can serve any request."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from typing import cast

from mcp_harness.access.store import console_sessions as store
from mcp_harness.access.tokens import TokenService, token_hash
from mcp_harness.base import Identity, ServiceBase
from mcp_harness.identity import Role, reserved_agent
from mcp_harness.store.common import now

SESSION_PREFIX = "mcphs_"
SESSION_SECONDS = 12 * 3600  #: how long a console session lasts (the cookie's max-age is the same)


def session_hash(session_id: str) -> str:
    return hashlib.sha256(session_id.encode()).hexdigest()


@dataclass(frozen=True)
class ConsoleSession:
    ident: Identity  #: who the session acts as: its token's workspace, agent and role
    token_key: str  #: the hash of the token it was made from (what stream limits count by)


class ConsoleSessionService(ServiceBase):
    async def start(self, token: str) -> str | None:
        """A new session id for a live token (None for an unknown or revoked one); the only time the
        id exists outside the browser."""
        if await TokenService(self.db, self.settings).verify(token) is None:
            return None
        session_id = SESSION_PREFIX + secrets.token_urlsafe(32)
        at = now()
        async with self.db.write() as conn:
            await store.purge(conn, at)  # expired sessions go as new ones come
            await store.insert(
                conn,
                session_hash=session_hash(session_id),
                token_hash=token_hash(token),
                at=at,
                expires=at + SESSION_SECONDS,
            )
        return session_id

    async def find(self, session_id: str) -> ConsoleSession | None:
        """The live session with this id: not expired, not ended, its token not revoked."""
        if not session_id.startswith(SESSION_PREFIX) or len(session_id) > 200:
            return None
        async with self.db.read() as conn:
            row = await store.find(conn, session_hash(session_id), now())
        if row is None or reserved_agent(row.agent):  # a token made before the name was reserved
            return None
        role = cast(Role, row.role)  # a Role when stored
        return ConsoleSession(Identity(workspace=row.workspace, agent=row.agent, role=role), row.token_hash)

    async def end(self, session_id: str) -> None:
        """Sign out: the session id is dead from now on, on every replica."""
        async with self.db.write() as conn:
            await store.end(conn, session_hash(session_id))
