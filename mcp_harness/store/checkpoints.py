"""Checkpoints, threads and content-addressed values: all of their SQL."""

from __future__ import annotations

from functools import cache
from typing import Any, NamedTuple

from sqlalchemy import Select, and_, bindparam, func, select, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .common import ensure_workspace, insert_ignore, now
from .raw import prebuilt
from .schemas import schemas
from .tables import Blob, Checkpoint, Thread

threads = Thread.__table__
checkpoints = Checkpoint.__table__
blobs = Blob.__table__

#: checkpoint columns without the manifest: what listings need
META_COLUMNS = [c for c in checkpoints.c if c.name != "manifest"]


_NEWEST_SCHEMA = (
    select(func.max(schemas.c.version))
    .where(schemas.c.workspace == threads.c.workspace, schemas.c.thread == threads.c.name)
    .correlate(threads)
    .scalar_subquery()
)
_LOCK_THREAD = prebuilt(
    select(
        threads.c.latest_version, threads.c.latest_id, checkpoints.c.manifest,
        schemas.c.version.label("schema_version"), schemas.c.document.label("schema_document"),
    )
    .select_from(
        threads.outerjoin(checkpoints, checkpoints.c.id == threads.c.latest_id).outerjoin(
            schemas,
            and_(
                schemas.c.workspace == threads.c.workspace,
                schemas.c.thread == threads.c.name,
                schemas.c.version == _NEWEST_SCHEMA,
            ),
        )
    )
    .where(threads.c.workspace == bindparam("p_ws"), threads.c.name == bindparam("p_thread"))
    .with_for_update(of=threads)
)  # fmt: skip
_INSERT_CHECKPOINT = prebuilt(checkpoints.insert())
_VALUE = prebuilt(
    select(blobs.c.data).where(blobs.c.workspace == bindparam("p_ws"), blobs.c.hash == bindparam("p_hash"))
)
_ADVANCE_THREAD = prebuilt(
    update(threads)
    .where(threads.c.workspace == bindparam("p_ws"), threads.c.name == bindparam("p_thread"))
    .values(latest_version=bindparam("p_version"), latest_id=bindparam("p_id"), updated_at=bindparam("p_at"))
)


class ThreadHead(NamedTuple):
    version: int  #: latest version, 0 before the first checkpoint
    checkpoint_id: str | None
    manifest: str | None  #: the latest checkpoint's manifest (JSON)
    schema: tuple[int, str] | None  #: the thread's newest JSON Schema: (version, document)


async def lock_thread(conn: AsyncConnection, workspace: str, thread: str) -> ThreadHead:
    """Lock the thread row until commit (creating it on the first save); returns what a save needs,
    in one statement: the latest version, its checkpoint id and manifest, the newest state schema.

    On PostgreSQL the row lock orders concurrent saves to one thread across hosts; on SQLite the
    write transaction (BEGIN IMMEDIATE) already does."""
    params = {"p_ws": workspace, "p_thread": thread}
    row = (await conn.execute(_LOCK_THREAD, params)).first()
    if row is None:
        await ensure_workspace(conn, workspace)
        await insert_ignore(conn, threads, [{"workspace": workspace, "name": thread, "updated_at": now()}])
        row = (await conn.execute(_LOCK_THREAD, params)).one()
    schema = (int(row.schema_version), row.schema_document) if row.schema_version is not None else None
    return ThreadHead(int(row.latest_version), row.latest_id, row.manifest, schema)


async def insert_checkpoint(conn: AsyncConnection, row: dict[str, Any], new_blobs: dict[str, bytes]) -> None:
    """Store a checkpoint, the values it introduces, and advance its thread."""
    await insert_ignore(
        conn, blobs, [{"workspace": row["workspace"], "hash": h, "data": d} for h, d in new_blobs.items()]
    )
    await conn.execute(_INSERT_CHECKPOINT, row)
    advance = {"p_ws": row["workspace"], "p_thread": row["thread"], "p_version": row["version"], "p_id": row["id"]}
    await conn.execute(_ADVANCE_THREAD, {**advance, "p_at": row["created_at"]})


#: a checkpoint's metadata columns, in the order of `CheckpointMeta`'s fields (`created_at` is still
#: a timestamp, `metadata` still JSON text): reads of metadata return rows of these, as tuples
META_COLUMNS = (
    checkpoints.c.id,
    checkpoints.c.thread,
    checkpoints.c.version,
    checkpoints.c.parent_id,
    checkpoints.c.label,
    checkpoints.c.metadata_json,
    checkpoints.c.created_at,
    checkpoints.c.size_bytes,
    checkpoints.c.agent,
    checkpoints.c.schema_version,
)


@cache
def _get_checkpoint(by: str) -> Select:
    stmt = select(*META_COLUMNS, checkpoints.c.manifest).where(checkpoints.c.workspace == bindparam("p_ws"))
    if by == "id":
        return stmt.where(checkpoints.c.id == bindparam("p_id"))
    stmt = stmt.where(checkpoints.c.thread == bindparam("p_thread"))
    if by == "version":
        stmt = stmt.where(checkpoints.c.version == bindparam("p_version"))
    elif by == "label":
        stmt = stmt.where(checkpoints.c.label == bindparam("p_label"))
    return prebuilt(stmt.order_by(checkpoints.c.version.desc()).limit(1))


async def get_checkpoint(
    conn: AsyncConnection,
    workspace: str,
    thread: str,
    *,
    version: int | None = None,
    checkpoint_id: str | None = None,
    label: str | None = None,
) -> tuple[Any, ...] | None:
    """One checkpoint: its `META_COLUMNS` then its manifest, by version, id, label (newest with it)
    or the latest."""
    params = {"p_ws": workspace, "p_thread": thread, "p_id": checkpoint_id, "p_version": version, "p_label": label}
    if checkpoint_id is not None:
        by = "id"
    elif version is not None:
        by = "version"
    else:
        by = "label" if label is not None else "latest"
    return (await conn.execute(_get_checkpoint(by), params)).first()


async def load_values(conn: AsyncConnection, workspace: str, hashes: list[str]) -> dict[str, bytes]:
    """Canonical bytes of the given value hashes (a few: one prebuilt lookup each; many: IN lists)."""
    out: dict[str, bytes] = {}
    unique = list(dict.fromkeys(hashes))
    if len(unique) <= 16:
        for h in unique:
            row = (await conn.execute(_VALUE, {"p_ws": workspace, "p_hash": h})).first()
            if row is not None:
                out[h] = bytes(row[0])
        return out
    for start in range(0, len(unique), 500):
        chunk = unique[start : start + 500]
        stmt = select(blobs.c.hash, blobs.c.data).where(blobs.c.workspace == workspace, blobs.c.hash.in_(chunk))
        for h, data in await conn.execute(stmt):
            out[h] = bytes(data)
    return out


async def list_checkpoints(
    conn: AsyncConnection, workspace: str, thread: str, *, limit: int, before_version: int | None
) -> list[tuple[Any, ...]]:
    """Checkpoint metadata (`META_COLUMNS`), newest first, one page (one query, no states loaded)."""
    params = {"p_ws": workspace, "p_thread": thread, "p_before": before_version, "p_limit": limit}
    return (await conn.execute(_list_statement(before_version is not None), params)).tuples().all()


@cache
def _list_statement(paged: bool) -> Select:
    stmt = select(*META_COLUMNS).where(
        checkpoints.c.workspace == bindparam("p_ws"), checkpoints.c.thread == bindparam("p_thread")
    )
    if paged:
        stmt = stmt.where(checkpoints.c.version < bindparam("p_before"))
    return prebuilt(stmt.order_by(checkpoints.c.version.desc()).limit(bindparam("p_limit")))


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
