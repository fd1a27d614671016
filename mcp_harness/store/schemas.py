"""Per-thread JSON Schemas: all of their SQL."""

from __future__ import annotations

from sqlalchemy import bindparam, func, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .raw import prebuilt
from .tables import StateSchema

schemas = StateSchema.__table__


_LATEST = prebuilt(
    select(schemas)
    .where(schemas.c.workspace == bindparam("p_ws"), schemas.c.thread == bindparam("p_thread"))
    .order_by(schemas.c.version.desc())
    .limit(1)
)


async def latest(conn: AsyncConnection, workspace: str, thread: str) -> RowMapping | None:
    return (await conn.execute(_LATEST, {"p_ws": workspace, "p_thread": thread})).mappings().first()


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
