"""HTTP bearer tokens: only their SHA-256 is stored."""

from __future__ import annotations

from mcp_harness.store import named
from mcp_harness.store.connection import Connection
from mcp_harness.store.records import TokenRow

Q = named.load("tokens")


async def insert(
    conn: Connection, *, token_hash: str, token_id: str, workspace: str, agent: str, role: str, created_at: float
) -> None:
    params = {
        "token_hash": token_hash,
        "token_id": token_id,
        "workspace": workspace,
        "agent": agent,
        "role": role,
        "created_at": created_at,
    }
    await conn.execute(Q.insert_token, params)


async def find(conn: Connection, token_hash: str) -> TokenRow | None:
    """The live (not revoked) token with this hash."""
    return await conn.fetch_one(Q.live_token, {"hash": token_hash})


async def list_all(conn: Connection, workspace: str | None) -> list[TokenRow]:
    if workspace is None:
        return await conn.fetch_all(Q.tokens)
    return await conn.fetch_all(Q.workspace_tokens, {"ws": workspace})


async def revoke(
    conn: Connection,
    at: float,
    *,
    token_hash: str | None = None,
    token_id: str | None = None,
    workspace: str | None = None,
    agent: str | None = None,
) -> int:
    """Mark live tokens revoked: one by hash or id, or all of workspace + agent. Returns how many."""
    if token_hash is not None:
        return await conn.execute(Q.revoke_token, {"at": at, "hash": token_hash, "id": token_id})
    return await conn.execute(Q.revoke_agent_tokens, {"at": at, "ws": workspace, "agent": agent})


async def count_active(conn: Connection) -> int:
    return int(await conn.fetch_value(Q.count_live_tokens))
