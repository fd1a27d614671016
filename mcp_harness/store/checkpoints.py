"""Checkpoints, threads and content-addressed values: all of their SQL."""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .common import ensure_workspace, insert_ignore, now
from .tables import Blob, Checkpoint, Thread

threads = Thread.__table__
checkpoints = Checkpoint.__table__
blobs = Blob.__table__

#: checkpoint columns without the manifest: what listings need
META_COLUMNS = [c for c in checkpoints.c if c.name != "manifest"]


async def lock_thread(conn: AsyncConnection, workspace: str, thread: str) -> tuple[int, str | None]:
    """Create the thread row if needed and lock it until commit; returns (latest version, latest id).

    On PostgreSQL the row lock orders concurrent saves to one thread across hosts; on SQLite the
    write transaction (BEGIN IMMEDIATE) already does."""
    await ensure_workspace(conn, workspace)
    await insert_ignore(conn, threads, [{"workspace": workspace, "name": thread, "updated_at": now()}])
    stmt = (
        select(threads.c.latest_version, threads.c.latest_id)
        .where(threads.c.workspace == workspace, threads.c.name == thread)
        .with_for_update()
    )
    row = (await conn.execute(stmt)).one()
    return int(row.latest_version), row.latest_id


async def insert_checkpoint(conn: AsyncConnection, row: dict[str, Any], new_blobs: dict[str, bytes]) -> None:
    """Store a checkpoint, the values it introduces, and advance its thread."""
    await insert_ignore(
        conn, blobs, [{"workspace": row["workspace"], "hash": h, "data": d} for h, d in new_blobs.items()]
    )
    await conn.execute(checkpoints.insert().values(**row))
    await conn.execute(
        update(threads)
        .where(threads.c.workspace == row["workspace"], threads.c.name == row["thread"])
        .values(latest_version=row["version"], latest_id=row["id"], updated_at=row["created_at"])
    )


async def get_checkpoint(
    conn: AsyncConnection,
    workspace: str,
    thread: str,
    *,
    version: int | None = None,
    checkpoint_id: str | None = None,
    label: str | None = None,
) -> RowMapping | None:
    """One checkpoint with its manifest: by version, id, label (newest with it) or the latest."""
    stmt = select(checkpoints).where(checkpoints.c.workspace == workspace)
    if checkpoint_id is not None:
        stmt = stmt.where(checkpoints.c.id == checkpoint_id)
    else:
        stmt = stmt.where(checkpoints.c.thread == thread)
        if version is not None:
            stmt = stmt.where(checkpoints.c.version == version)
        elif label is not None:
            stmt = stmt.where(checkpoints.c.label == label)
        stmt = stmt.order_by(checkpoints.c.version.desc()).limit(1)
    return (await conn.execute(stmt)).mappings().first()


async def load_values(conn: AsyncConnection, workspace: str, hashes: list[str]) -> dict[str, bytes]:
    """Canonical bytes of the given value hashes."""
    out: dict[str, bytes] = {}
    unique = list(dict.fromkeys(hashes))
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        stmt = select(blobs.c.hash, blobs.c.data).where(blobs.c.workspace == workspace, blobs.c.hash.in_(chunk))
        for h, data in await conn.execute(stmt):
            out[h] = bytes(data)
    return out


async def list_checkpoints(
    conn: AsyncConnection, workspace: str, thread: str, *, limit: int, before_version: int | None
) -> list[RowMapping]:
    """Checkpoint metadata, newest first, one page (one query, no states loaded)."""
    stmt = select(*META_COLUMNS).where(checkpoints.c.workspace == workspace, checkpoints.c.thread == thread)
    if before_version is not None:
        stmt = stmt.where(checkpoints.c.version < before_version)
    stmt = stmt.order_by(checkpoints.c.version.desc()).limit(limit)
    return list((await conn.execute(stmt)).mappings())


async def list_threads(conn: AsyncConnection, workspace: str) -> list[RowMapping]:
    """Threads with their latest version and the size of their latest state."""
    stmt = (
        select(
            threads.c.name,
            threads.c.latest_version,
            threads.c.latest_id,
            threads.c.updated_at,
            checkpoints.c.size_bytes,
        )
        .join(checkpoints, checkpoints.c.id == threads.c.latest_id)
        .where(threads.c.workspace == workspace, threads.c.latest_version > 0)
        .order_by(threads.c.name)
    )
    return list((await conn.execute(stmt)).mappings())


async def count_checkpoints(conn: AsyncConnection, workspace: str) -> int:
    stmt = select(func.count()).select_from(checkpoints).where(checkpoints.c.workspace == workspace)
    return int((await conn.execute(stmt)).scalar_one())


async def largest(conn: AsyncConnection, workspace: str, limit: int = 5) -> list[RowMapping]:
    stmt = (
        select(*META_COLUMNS)
        .where(checkpoints.c.workspace == workspace)
        .order_by(checkpoints.c.size_bytes.desc(), checkpoints.c.created_at.desc())
        .limit(limit)
    )
    return list((await conn.execute(stmt)).mappings())
