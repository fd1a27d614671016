"""Remembered results of mutating calls, keyed by workspace + agent + tool + key."""

from __future__ import annotations

from sqlalchemy import bindparam, delete, select
from sqlalchemy.ext.asyncio import AsyncConnection

from .raw import prebuilt
from .tables import IdempotencyKey

keys = IdempotencyKey.__table__
_GET = prebuilt(
    select(keys.c.request_hash, keys.c.result).where(
        keys.c.workspace == bindparam("p_ws"),
        keys.c.agent == bindparam("p_agent"),
        keys.c.tool == bindparam("p_tool"),
        keys.c.key == bindparam("p_key"),
    )
)


async def get(conn: AsyncConnection, workspace: str, agent: str, tool: str, key: str) -> tuple[str, str] | None:
    """(request hash, stored result JSON) of an earlier successful call with this key, if any."""
    params = {"p_ws": workspace, "p_agent": agent, "p_tool": tool, "p_key": key}
    row = (await conn.execute(_GET, params)).first()
    return (row.request_hash, row.result) if row else None


async def put(
    conn: AsyncConnection, workspace: str, agent: str, tool: str, key: str, request_hash: str, result: str, at: float
) -> None:
    await conn.execute(
        keys.insert().values(
            workspace=workspace,
            agent=agent,
            tool=tool,
            key=key,
            request_hash=request_hash,
            result=result,
            created_at=at,
        )
    )


async def purge(conn: AsyncConnection, older_than: float) -> int:
    """Forget keys created before `older_than`; returns how many."""
    result = await conn.execute(delete(keys).where(keys.c.created_at < older_than))
    return int(result.rowcount or 0)
