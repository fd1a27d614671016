"""Per-thread JSON Schemas: all of their SQL."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .tables import StateSchema

schemas = StateSchema.__table__


async def latest(conn: AsyncConnection, workspace: str, thread: str) -> RowMapping | None:
    stmt = (
        select(schemas)
        .where(schemas.c.workspace == workspace, schemas.c.thread == thread)
        .order_by(schemas.c.version.desc())
        .limit(1)
    )
    return (await conn.execute(stmt)).mappings().first()


async def add(conn: AsyncConnection, workspace: str, thread: str, schema_json: str, at: float) -> int:
    stmt = select(func.coalesce(func.max(schemas.c.version), 0)).where(
        schemas.c.workspace == workspace, schemas.c.thread == thread
    )
    version = int((await conn.execute(stmt)).scalar_one()) + 1
    await conn.execute(
        schemas.insert().values(
            workspace=workspace, thread=thread, version=version, document=schema_json, created_at=at
        )
    )
    return version
