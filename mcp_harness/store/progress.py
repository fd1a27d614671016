"""The progress log: all of its SQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .common import bump_counter
from .tables import Progress

progress = Progress.__table__


async def append(conn: AsyncConnection, row: dict[str, Any]) -> int:
    """Append an entry; returns its `seq`, allocated under the workspace row lock so that seq order
    is commit order on every backend."""
    seq = await bump_counter(conn, row["workspace"], "progress_seq")
    await conn.execute(progress.insert().values(**row, seq=seq))
    return seq


async def recent(
    conn: AsyncConnection,
    workspace: str,
    *,
    thread: str | None = None,
    task_key: str | None = None,
    limit: int = 5,
    before_seq: int | None = None,
) -> list[RowMapping]:
    """Entries newest first."""
    stmt = select(progress).where(progress.c.workspace == workspace)
    if thread is not None:
        stmt = stmt.where(progress.c.thread == thread)
    if task_key is not None:
        stmt = stmt.where(progress.c.task_key == task_key)
    if before_seq is not None:
        stmt = stmt.where(progress.c.seq < before_seq)
    stmt = stmt.order_by(progress.c.seq.desc()).limit(limit)
    return list((await conn.execute(stmt)).mappings())


async def count(conn: AsyncConnection, workspace: str) -> int:
    stmt = select(func.count()).select_from(progress).where(progress.c.workspace == workspace)
    return int((await conn.execute(stmt)).scalar_one())
