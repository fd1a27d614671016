"""Checkpoints, threads and content-addressed values."""

from __future__ import annotations

from typing import Any

from mcp_harness.store import named
from mcp_harness.store.common import ensure_workspace, now
from mcp_harness.store.connection import Connection, array, fetch_row
from mcp_harness.store.records import CheckpointRow, CheckpointWithManifest, ThreadHead, ThreadRow

Q = named.load("checkpoints")


async def lock_thread(conn: Connection, workspace: str, thread: str) -> ThreadHead:
    """Lock the thread row until commit (creating it on the first save); returns what a save needs,
    in one statement: the latest version, its checkpoint id and manifest, the newest state schema.

    On PostgreSQL the row lock orders concurrent saves to one thread across hosts, and the save first
    takes the workspace's values lock (shared: saves run side by side) so that prune's value clean-up
    never runs while it commits (see `Q.save_values_lock`); on SQLite the write transaction (BEGIN
    IMMEDIATE) already does both."""
    params = {"ws": workspace, "thread": thread}
    if conn.dialect == "postgresql":
        await conn.execute(Q.save_values_lock, params)
    head = await conn.fetch_one(Q.lock_thread, params)
    if head is None:
        await ensure_workspace(conn, workspace)
        await conn.execute(Q.insert_thread, {**params, "at": now()})
        head = await fetch_row(conn, Q.lock_thread, params)
    return head


async def insert_checkpoint(conn: Connection, row: dict[str, Any], new_blobs: dict[str, bytes]) -> None:
    """Store a checkpoint (`row`: a value for every column of `Q.insert_checkpoint`), the values it
    introduces, and advance its thread."""
    ws = row["workspace"]
    if new_blobs:
        await conn.execute_many(Q.insert_blob, [{"ws": ws, "hash": h, "data": d} for h, d in new_blobs.items()])
    await conn.execute(Q.insert_checkpoint, row)
    advance = {"ws": ws, "thread": row["thread"], "version": row["version"], "id": row["id"], "at": row["created_at"]}
    await conn.execute(Q.advance_thread, advance)


async def get_checkpoint(
    conn: Connection,
    workspace: str,
    thread: str,
    *,
    version: int | None = None,
    checkpoint_id: str | None = None,
    label: str | None = None,
) -> CheckpointWithManifest | None:
    """One checkpoint with its manifest: by id, version, label (the newest with it) or the latest."""
    if checkpoint_id is not None:
        return await conn.fetch_one(Q.checkpoint_by_id, {"ws": workspace, "id": checkpoint_id})
    params = {"ws": workspace, "thread": thread}
    if version is not None:
        return await conn.fetch_one(Q.checkpoint_by_version, {**params, "version": version})
    if label is not None:
        return await conn.fetch_one(Q.checkpoint_by_label, {**params, "label": label})
    return await conn.fetch_one(Q.latest_checkpoint, params)


async def load_values(conn: Connection, workspace: str, hashes: list[str]) -> dict[str, bytes]:
    """Canonical bytes of the given value hashes."""
    unique = list(dict.fromkeys(hashes))
    if len(unique) == 1:
        data = await conn.fetch_value(Q.blob, {"ws": workspace, "hash": unique[0]})
        return {} if data is None else {unique[0]: data}
    rows = await conn.fetch_all(Q.blobs, {"ws": workspace, "hashes": array(conn.dialect, unique)})
    return {row.hash: row.data for row in rows}


async def list_checkpoints(
    conn: Connection, workspace: str, thread: str, *, limit: int, before_version: int | None
) -> list[CheckpointRow]:
    """Checkpoint metadata, newest first, one page (one query, no states loaded)."""
    params = {"ws": workspace, "thread": thread, "limit": limit}
    if before_version is None:
        return await conn.fetch_all(Q.list_checkpoints, params)
    return await conn.fetch_all(Q.list_checkpoints_before, {**params, "before": before_version})


async def list_threads(conn: Connection, workspace: str) -> list[ThreadRow]:
    """Threads with their latest version and the size of their latest state."""
    return await conn.fetch_all(Q.list_threads, {"ws": workspace})


async def count_checkpoints(conn: Connection, workspace: str) -> int:
    return int(await conn.fetch_value(Q.count_checkpoints, {"ws": workspace}))


async def largest(conn: Connection, workspace: str, limit: int = 5) -> list[CheckpointRow]:
    """The biggest checkpoints, newest first among equals."""
    return await conn.fetch_all(Q.largest_checkpoints, {"ws": workspace, "limit": limit})


async def behind(conn: Connection, workspace: str, checkpoint_id: str, cap: int) -> tuple[int, int]:
    """(progress entries, task events) written since the checkpoint was saved, each counted up to `cap`."""
    row = await conn.fetch_one(Q.behind_checkpoint, {"ws": workspace, "id": checkpoint_id, "cap": cap})
    return (int(row[0]), int(row[1])) if row is not None else (0, 0)
