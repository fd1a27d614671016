"""Path reservations (migration 11): the patterns a lease holds. A reservation is live while its task is
claimed under the same lease token and the lease has not run out, so it ends with the lease (complete,
release, expiry, a session's end) without a write of its own. Whether two patterns overlap is
`paths.overlap`, decided by the service; this module reads and writes the rows."""

from __future__ import annotations

import hashlib
from typing import Any

from mcp_harness.store import named
from mcp_harness.store.connection import Connection, array
from mcp_harness.store.records import ReservationRow
from mcp_harness.tasks.patterns import anchor

Q = named.load("reservations")


def _lock_id(workspace: str) -> int:
    digest = hashlib.blake2b(f"mcp-harness paths {workspace}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


async def lock(conn: Connection, workspace: str) -> None:
    """PostgreSQL: take turns with every other change of this workspace's reservations until commit.
    (SQLite's BEGIN IMMEDIATE keeps other writers out already.)"""
    if conn.dialect == "postgresql":
        await conn.execute(Q.lock, {"id": _lock_id(workspace)})


async def live(conn: Connection, workspace: str, now: float) -> list[ReservationRow]:
    """Every live reservation of the workspace, the soonest to end first."""
    return await conn.fetch_all(Q.live, {"ws": workspace, "now": now})


async def near(conn: Connection, workspace: str, pattern: str, now: float) -> list[ReservationRow]:
    """The live reservations whose anchors allow an overlap with `pattern` (all of them for a pattern
    anchored at the root, such as `*.py`); `paths.overlap` decides among them."""
    head = anchor(pattern)
    if not head:
        return await live(conn, workspace, now)
    heads = ["/".join(head[:k]) for k in range(len(head) + 1)]
    joined = "/".join(head)
    params = {
        "ws": workspace,
        "heads": array(conn.dialect, heads),
        "below": joined + "/",
        "beyond": joined + "0",  # the character after "/"
        "now": now,
    }
    return await conn.fetch_all(Q.near, params)


async def held(conn: Connection, task_id: int, token: str) -> dict[str, bool]:
    """pattern -> shared, of what one lease holds (live or not)."""
    return {row.pattern: bool(row.shared) for row in await conn.fetch_all(Q.held, {"task_id": task_id, "token": token})}


async def held_by_tokens(conn: Connection, workspace: str, tokens: list[str]) -> dict[str, dict[str, bool]]:
    """token -> {pattern: shared}, for several leases."""
    out: dict[str, dict[str, bool]] = {}
    if tokens:
        params = {"ws": workspace, "tokens": array(conn.dialect, tokens)}
        for row in await conn.fetch_all(Q.held_by_tokens, params):
            out.setdefault(row.lease_token, {})[row.pattern] = bool(row.shared)
    return out


async def reserve(
    conn: Connection, workspace: str, task_id: int, token: str, patterns: dict[str, bool], *, fresh: bool = False
) -> None:
    """Hold `patterns` (pattern -> shared) under the lease; `fresh` (a new claim): the task's earlier
    leases' rows are dropped first."""
    if fresh:
        await conn.execute(Q.drop_stale, {"task_id": task_id, "token": token})
    rows: list[dict[str, Any]] = []
    for pattern, shared in patterns.items():
        await conn.execute(Q.drop_one, {"task_id": task_id, "token": token, "pattern": pattern})
        rows.append(
            {
                "task_id": task_id,
                "token": token,
                "pattern": pattern,
                "ws": workspace,
                "shared": shared,
                "anchor": "/".join(anchor(pattern)),
            }
        )
    if rows:
        await conn.execute_many(Q.insert, rows)


async def unreserve(conn: Connection, task_id: int, token: str, patterns: list[str]) -> None:
    for pattern in patterns:
        await conn.execute(Q.drop_one, {"task_id": task_id, "token": token, "pattern": pattern})
