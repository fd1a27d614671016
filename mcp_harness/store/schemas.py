"""Per-thread JSON Schemas: all of their SQL."""

from __future__ import annotations

from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncConnection

from .tables import StateSchema

schemas = StateSchema.__table__


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
