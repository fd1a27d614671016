"""What the console shows of path reservations: the paths some tasks' live leases hold now (a board
column's claimed cards). Whether a reservation is live is the store's rule (`tasks/store/reservations.py`): its
task is claimed under the same lease token and the lease has not run out."""

from __future__ import annotations

from collections.abc import Iterable

from mcp_harness.store import named
from mcp_harness.store.connection import Connection, array

Q = named.load("console_paths")


async def held_by_tasks(
    conn: Connection, workspace: str, task_ids: Iterable[int], at: float
) -> dict[str, dict[str, bool]]:
    """task key -> {pattern: shared} that its live lease holds, for the tasks of `task_ids` (row ids)."""
    ids = sorted(set(task_ids))
    out: dict[str, dict[str, bool]] = {}
    if ids:
        params = {"ws": workspace, "ids": array(conn.dialect, ids), "now": at}
        for row in await conn.fetch_all(Q.held_by_tasks, params):
            out.setdefault(row.key, {})[row.pattern] = bool(row.shared)
    return out
