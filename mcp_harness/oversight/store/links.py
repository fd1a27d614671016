"""Reads for the console's joins of checkpoints to the work: which progress entry and task a version
was saved with, and which versions were saved near some entries or while a task was held. The rule
(what "nearest" and "held" mean, the window) is the service's (`oversight/links.py`); these are
its indexed lookups (migration 13)."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from mcp_harness.store import named
from mcp_harness.store.connection import Connection, array
from mcp_harness.store.records import ProgressRow

Q = named.load("console_links")


async def saved_with(conn: Connection, workspace: str, ids: list[str], *, window: float) -> list[Any]:
    """For each checkpoint of `ids` (of this workspace): id, thread, version, agent, created_at, and
    `before_seq`, `after_seq`: its agent's entries nearest the save on either side, within `window`
    seconds (None where there is none)."""
    if not ids:
        return []
    params = {"ws": workspace, "ids": array(conn.dialect, ids), "window": window}
    return await conn.fetch_all(Q.saved_with, params)


async def held_when_saved(
    conn: Connection, workspace: str, ids: list[str], *, scan: int, ends: Iterable[str]
) -> dict[str, str]:
    """checkpoint id -> the task its agent held when it saved (by its `scan` newest task events up to
    the save; an event of a kind in `ends` ends a hold), for those of `ids` where there is one."""
    if not ids:
        return {}
    params = {"ws": workspace, "ids": array(conn.dialect, ids), "scan": scan, "ends": array(conn.dialect, sorted(ends))}
    return {r.id: r.held_key for r in await conn.fetch_all(Q.held_when_saved, params) if r.held_key}


async def entries(conn: Connection, workspace: str, seqs: Iterable[int]) -> dict[int, ProgressRow]:
    """Progress entries by seq."""
    wanted = sorted(set(seqs))
    if not wanted:
        return {}
    rows = await conn.fetch_all(Q.entries, {"ws": workspace, "seqs": array(conn.dialect, wanted)})
    return {r.seq: r for r in rows}


async def saved_near_entries(
    conn: Connection, workspace: str, seqs: Iterable[int], *, window: float, limit: int
) -> list[str]:
    """Ids of checkpoints saved by an entry's agent within `window` seconds of it (at most `limit`)."""
    wanted = sorted(set(seqs))
    if not wanted:
        return []
    params = {"ws": workspace, "seqs": array(conn.dialect, wanted), "window": window, "limit": limit}
    return list(dict.fromkeys(r.id for r in await conn.fetch_all(Q.saved_near_entries, params)))


async def saved_between(
    conn: Connection, workspace: str, agent: str, since: float, until: float, limit: int
) -> list[str]:
    """Ids of the checkpoints `agent` saved from `since` to `until`, the newest first (at most `limit`)."""
    params = {"ws": workspace, "agent": agent, "since": since, "until": until, "limit": limit}
    return [r.id for r in await conn.fetch_all(Q.saved_between, params)]


async def place(conn: Connection, workspace: str, checkpoint_id: str) -> tuple[str, int] | None:
    """(thread, version) of a checkpoint of this workspace, or None."""
    row = await conn.fetch_one(Q.place, {"ws": workspace, "id": checkpoint_id})
    return None if row is None else (row.thread, int(row.version))
