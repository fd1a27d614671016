"""The progress log."""

from __future__ import annotations

from typing import Any

from . import named
from .common import next_progress_seq
from .connection import Connection
from .queries import recent_progress
from .records import ProgressRow

Q = named.load("progress")


async def append(conn: Connection, row: dict[str, Any]) -> int:
    """Append an entry (`row`: every column of `Q.insert_progress` but `seq`); returns its `seq`,
    allocated under the workspace row lock so that seq order is commit order on every backend."""
    seq = await next_progress_seq(conn, row["workspace"])
    await conn.execute(Q.insert_progress, {**row, "seq": seq})
    return seq


async def recent(
    conn: Connection,
    workspace: str,
    *,
    thread: str | None = None,
    task_key: str | None = None,
    limit: int = 5,
    before_seq: int | None = None,
) -> list[ProgressRow]:
    """Entries newest first."""
    if limit == 0:
        return []
    query = recent_progress(thread is not None, task_key is not None, before_seq is not None)
    params = {"ws": workspace, "thread": thread, "task": task_key, "before": before_seq, "limit": limit}
    return await conn.fetch_all(query, params)


async def count(conn: Connection, workspace: str) -> int:
    return int(await conn.fetch_value(Q.count_progress, {"ws": workspace}))
