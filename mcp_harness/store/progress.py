"""The progress log: all of its SQL."""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Select, bindparam, func, select
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .common import bump_counter
from .raw import prebuilt
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
    if limit == 0:
        return []
    params = {"p_ws": workspace, "p_thread": thread, "p_task": task_key, "p_before": before_seq, "p_limit": limit}
    stmt = _recent(thread is not None, task_key is not None, before_seq is not None)
    return list((await conn.execute(stmt, params)).mappings())


@cache
def _recent(by_thread: bool, by_task: bool, paged: bool) -> Select:
    stmt = select(progress).where(progress.c.workspace == bindparam("p_ws"))
    if by_thread:
        stmt = stmt.where(progress.c.thread == bindparam("p_thread"))
    if by_task:
        stmt = stmt.where(progress.c.task_key == bindparam("p_task"))
    if paged:
        stmt = stmt.where(progress.c.seq < bindparam("p_before"))
    return prebuilt(stmt.order_by(progress.c.seq.desc()).limit(bindparam("p_limit")))


async def count(conn: AsyncConnection, workspace: str) -> int:
    stmt = select(func.count()).select_from(progress).where(progress.c.workspace == workspace)
    return int((await conn.execute(stmt)).scalar_one())
