"""Console sessions of the shared server's `/ui`: only a hash of the session id is kept, with the
token (its hash) it was made from; a session lives while it has not expired and its token is live."""

from __future__ import annotations

from mcp_harness.store.connection import Connection, Query, Record


class SessionRow(Record):
    """Who a live session acts as: its token's workspace, agent and role."""

    __slots__ = ()

    token_hash: str
    workspace: str
    agent: str
    role: str


INSERT_SESSION = Query(
    "INSERT INTO console_sessions (session_hash, token_hash, created_at, expires_at) "
    "VALUES (:session_hash, :token_hash, :at, :expires)",
    name="INSERT_SESSION",
)
LIVE_SESSION = Query(
    "SELECT t.token_hash, t.workspace, t.agent, t.role FROM console_sessions s "
    "JOIN api_tokens t ON t.token_hash = s.token_hash "
    "WHERE s.session_hash = :hash AND s.expires_at > :now AND t.revoked_at IS NULL",
    row=SessionRow,
    name="LIVE_SESSION",
)
END_SESSION = Query("DELETE FROM console_sessions WHERE session_hash = :hash", name="END_SESSION")
END_TOKEN_SESSIONS = Query(
    "DELETE FROM console_sessions WHERE token_hash IN (SELECT token_hash FROM api_tokens WHERE revoked_at IS NOT NULL)",
    name="END_TOKEN_SESSIONS",
)
PURGE_SESSIONS = Query("DELETE FROM console_sessions WHERE expires_at <= :now", name="PURGE_SESSIONS")


async def insert(conn: Connection, *, session_hash: str, token_hash: str, at: float, expires: float) -> None:
    params = {"session_hash": session_hash, "token_hash": token_hash, "at": at, "expires": expires}
    await conn.execute(INSERT_SESSION, params)


async def find(conn: Connection, session_hash: str, now: float) -> SessionRow | None:
    """The live session with this hash: not expired, not ended, its token not revoked."""
    return await conn.fetch_one(LIVE_SESSION, {"hash": session_hash, "now": now})


async def end(conn: Connection, session_hash: str) -> int:
    return await conn.execute(END_SESSION, {"hash": session_hash})


async def end_revoked(conn: Connection) -> int:
    """Delete the sessions of revoked tokens (they are dead already: `find` joins the live token)."""
    return await conn.execute(END_TOKEN_SESSIONS)


async def purge(conn: Connection, now: float) -> int:
    return await conn.execute(PURGE_SESSIONS, {"now": now})
