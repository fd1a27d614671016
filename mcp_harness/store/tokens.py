"""HTTP bearer tokens: only their SHA-256 is stored."""

from __future__ import annotations

from sqlalchemy import func, or_, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .tables import ApiToken

tokens = ApiToken.__table__


async def insert(conn: AsyncConnection, **row: object) -> None:
    await conn.execute(tokens.insert().values(**row))


async def find(conn: AsyncConnection, token_hash: str) -> RowMapping | None:
    stmt = select(tokens).where(tokens.c.token_hash == token_hash, tokens.c.revoked_at.is_(None))
    return (await conn.execute(stmt)).mappings().first()


async def list_all(conn: AsyncConnection, workspace: str | None) -> list[RowMapping]:
    stmt = select(tokens).order_by(tokens.c.created_at)
    if workspace is not None:
        stmt = stmt.where(tokens.c.workspace == workspace)
    return list((await conn.execute(stmt)).mappings())


async def revoke(
    conn: AsyncConnection,
    at: float,
    *,
    token_hash: str | None = None,
    token_id: str | None = None,
    workspace: str | None = None,
    agent: str | None = None,
) -> int:
    """Mark live tokens revoked: one by hash or id, or all of workspace + agent. Returns how many."""
    stmt = update(tokens).where(tokens.c.revoked_at.is_(None)).values(revoked_at=at)
    if token_hash is not None:
        stmt = stmt.where(or_(tokens.c.token_hash == token_hash, tokens.c.token_id == token_id))
    else:
        stmt = stmt.where(tokens.c.workspace == workspace, tokens.c.agent == agent)
    return int((await conn.execute(stmt)).rowcount or 0)


async def count_active(conn: AsyncConnection) -> int:
    stmt = select(func.count()).select_from(tokens).where(tokens.c.revoked_at.is_(None))
    return int((await conn.execute(stmt)).scalar_one())
