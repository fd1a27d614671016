"""Remembered results of mutating calls, keyed by workspace + agent + tool + key."""

from __future__ import annotations

from mcp_harness.store import named
from mcp_harness.store.connection import Connection
from mcp_harness.store.records import StoredResult

Q = named.load("idempotency")


async def get(conn: Connection, workspace: str, agent: str, tool: str, key: str) -> StoredResult | None:
    """The request hash and result of an earlier successful call with this key, if any."""
    return await conn.fetch_one(Q.stored_result, {"ws": workspace, "agent": agent, "tool": tool, "key": key})


async def put(
    conn: Connection, workspace: str, agent: str, tool: str, key: str, request_hash: str, result: str, at: float
) -> None:
    """Remember a result. Two calls with one key racing: the loser gets `UniqueViolation` (PostgreSQL)."""
    params = {
        "ws": workspace,
        "agent": agent,
        "tool": tool,
        "key": key,
        "request_hash": request_hash,
        "result": result,
        "at": at,
    }
    await conn.execute(Q.store_result, params)


async def purge(conn: Connection, older_than: float) -> int:
    """Forget keys created before `older_than`; returns how many."""
    return await conn.execute(Q.purge_results, {"before": older_than})
