"""Reads for the operator console and the metrics: board columns, what tasks wait on, the dependency
graph, the filtered timeline, who was seen when. Literal SQL on a `read()` connection, like the hot
paths; each runs when a person opens a page or a scraper asks."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ..task_states import BLOCKED
from ..task_states import Status as S
from .connection import Connection, Query, array
from .queries import _both, columns, in_array
from .records import ProgressRow, TaskRecord
from .search import PROGRESS_TEXT, Terms, search_refused, tsquery

_TASK = columns(TaskRecord)
_ORDER = {
    S.PENDING: ("status = 'pending' AND blocked = FALSE", "priority DESC, id"),
    S.CLAIMED: ("status = 'claimed'", "lease_expires_at, id"),
    S.IN_REVIEW: ("status = 'in_review'", "updated_at, id"),  # the longest waiting first
    S.CANCELLED: ("status = 'cancelled'", "updated_at DESC, id DESC"),
    BLOCKED: ("status = 'pending' AND blocked = TRUE", "priority DESC, id"),
    S.FAILED: ("status = 'failed'", "updated_at DESC, id DESC"),
    S.DONE: ("status = 'done'", "completed_at DESC, id DESC"),
}
#: how each board column is filtered and ordered (`blocked`: pending behind a failed dependency)
COLUMN = {
    status: Query(
        f"SELECT {_TASK} FROM tasks WHERE workspace = :ws AND {where} ORDER BY {order} LIMIT :limit",
        row=TaskRecord,
        name=f"console_column_{status}",
    )  # fmt: skip
    for status, (where, order) in _ORDER.items()
}
#: (workspace, agent) seen in this many newest progress entries count for "last seen"
RECENT_ENTRIES = 5000

WORKSPACE_ROWS = Query("SELECT name FROM workspaces")
FIRST_TASK_WORKSPACE = Query("SELECT min(workspace) FROM tasks")
NEXT_TASK_WORKSPACE = Query("SELECT min(workspace) FROM tasks WHERE workspace > :after")
OPEN_DEPENDENCIES = _both(
    lambda d: (
        'SELECT d.task_key, t."key", t.status, t.blocked, t.owner FROM task_deps AS d '
        'JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key '
        f"WHERE d.workspace = :ws AND t.status NOT IN ('done', 'cancelled') AND {in_array('d.task_key', 'keys', d)} "
        "ORDER BY d.task_key, t.id"
    ),
    name="console_open_dependencies",
)  # a cancelled dependency holds nothing back (contract revision 2): only done and cancelled are left out
CANCEL_REASONS = _both(
    lambda d: (
        "SELECT task_key, detail FROM task_events WHERE workspace = :ws AND kind = 'cancel' "
        f"AND {in_array('task_key', 'keys', d)} ORDER BY task_key, id"
    ),
    name="console_cancel_reasons",
)
_DEPENDENCIES = (
    'SELECT t."key", t.title, t.status, t.blocked, t.owner, t.kind, t.review FROM tasks AS t JOIN task_deps AS d '
    'ON d.workspace = t.workspace AND d.{other} = t."key" WHERE d.workspace = :ws AND d.{mine} = :key ORDER BY t.id'
)
DEPENDENCIES = Query(_DEPENDENCIES.format(mine="task_key", other="dep_key"), name="console_dependencies")
DEPENDENTS = Query(_DEPENDENCIES.format(mine="dep_key", other="task_key"), name="console_dependents")
GRAPH_NODES = Query(
    'SELECT "key", title, status, blocked, owner, priority, kind, review FROM tasks WHERE workspace = :ws '
    "ORDER BY id LIMIT :limit"
)
GRAPH_EDGES = _both(
    lambda d: f"SELECT task_key, dep_key FROM task_deps WHERE workspace = :ws AND {in_array('task_key', 'keys', d)}",
    name="console_graph_edges",
)
COUNT_TASKS = Query("SELECT count(*) FROM tasks WHERE workspace = :ws")
LAST_SEEN = Query("""
SELECT agent, max(at) AS at FROM (
    SELECT agent, max(created_at) AS at FROM progress WHERE workspace = :ws
        AND seq > (SELECT progress_seq FROM workspaces WHERE name = :ws) - :recent GROUP BY agent
    UNION ALL
    SELECT agent, max(created_at) AS at FROM checkpoints WHERE workspace = :ws GROUP BY agent
    UNION ALL
    SELECT owner AS agent, max(updated_at) AS at FROM tasks WHERE workspace = :ws AND owner IS NOT NULL GROUP BY owner
) AS seen GROUP BY agent
""")
CLAIMED = Query(
    'SELECT "key", title, owner, attempts, max_attempts, lease_expires_at, updated_at FROM tasks '
    "WHERE workspace = :ws AND ready = TRUE AND status = 'claimed' ORDER BY lease_expires_at"
)
COUNTS_BY_WORKSPACE = Query(
    "SELECT workspace, status, blocked, CAST(sum(n) AS BIGINT) AS n FROM task_counts "
    "GROUP BY workspace, status, blocked"
)
EXPIRED_LEASES_BY_WORKSPACE = Query(
    "SELECT workspace, count(*) AS n FROM tasks WHERE ready = TRUE AND status = 'claimed' "
    "AND lease_expires_at <= :now GROUP BY workspace"
)


@cache
def timeline_query(
    agent: bool, task_key: bool, thread: bool, status: bool, text: tuple[tuple[int, ...], int] | None, before: bool
) -> Query:
    """Progress entries newest first, with the filters asked for (one fixed statement per shape); `text`:
    the shape of a full-text query (`search.py`) the entries must match."""
    where = ["workspace = :ws"]
    where += [f"{c} = :{c}" for c, on in (("agent", agent), ("task_key", task_key), ("thread", thread),
                                          ("status", status)) if on]  # fmt: skip
    if before:
        where.append("seq < :before_seq")
    head = f"SELECT {columns(ProgressRow)} FROM progress WHERE "
    tail = " ORDER BY seq DESC LIMIT :limit"
    sqlite = head + " AND ".join(where) + tail
    postgresql = None
    if text is not None:
        sqlite = head + " AND ".join([*where, "id IN (SELECT rowid FROM progress_fts WHERE progress_fts MATCH :q)"])
        postgresql = head + " AND ".join([*where, f"{PROGRESS_TEXT} @@ ({tsquery(text)})"]) + tail
        sqlite += tail
    name = f"console_timeline({agent}, {task_key}, {thread}, {status}, {text}, {before})"
    return Query(sqlite, postgresql=postgresql, row=ProgressRow, name=name)


async def workspace_names(conn: Connection) -> list[str]:
    """Every workspace with data: the workspace rows (progress, checkpoints) and the workspaces of tasks,
    found by skipping through the task key index (one probe per workspace, not a scan)."""
    names = {row.name for row in await conn.fetch_all(WORKSPACE_ROWS)}
    name = await conn.fetch_value(FIRST_TASK_WORKSPACE)
    while name is not None:
        names.add(name)
        name = await conn.fetch_value(NEXT_TASK_WORKSPACE, {"after": name})
    return sorted(names)


async def column(conn: Connection, workspace: str, status: str, limit: int) -> list[TaskRecord]:
    """The first `limit` tasks of one board column, in the order a person reads it: pending and blocked
    in claim order, claimed by the lease that runs out first, done and failed newest first."""
    return await conn.fetch_all(COLUMN[status], {"ws": workspace, "limit": limit})


async def open_dependencies(conn: Connection, workspace: str, keys: list[str]) -> list:
    """For each of `keys`, its dependencies that are not done yet: task_key, key, status, blocked, owner."""
    if not keys:
        return []
    return await conn.fetch_all(OPEN_DEPENDENCIES, {"ws": workspace, "keys": array(conn.dialect, keys)})


async def cancel_reasons(conn: Connection, workspace: str, keys: list[str]) -> dict[str, str]:
    """For each of `keys` that was cancelled, the reason its latest cancel gave (the task events keep it)."""
    if not keys:
        return {}
    rows = await conn.fetch_all(CANCEL_REASONS, {"ws": workspace, "keys": array(conn.dialect, keys)})
    return {r.task_key: json.loads(r.detail or "{}").get("reason") for r in rows}  # the latest wins


async def dependencies(conn: Connection, workspace: str, key: str, *, reverse: bool) -> list:
    """The tasks `key` depends on (or, `reverse`, the tasks that depend on it): key, title, status, blocked, owner."""
    return await conn.fetch_all(DEPENDENTS if reverse else DEPENDENCIES, {"ws": workspace, "key": key})


async def graph(conn: Connection, workspace: str, limit: int) -> tuple[list, list[tuple[str, str]]]:
    """The first `limit` tasks (creation order) and the dependency edges (task, dependency) among them."""
    nodes = await conn.fetch_all(GRAPH_NODES, {"ws": workspace, "limit": limit})
    keys = {n.key for n in nodes}
    if not keys:
        return nodes, []
    rows = await conn.fetch_all(GRAPH_EDGES, {"ws": workspace, "keys": array(conn.dialect, sorted(keys))})
    return nodes, [(r.task_key, r.dep_key) for r in rows if r.dep_key in keys]


async def count_tasks(conn: Connection, workspace: str) -> int:
    return int(await conn.fetch_value(COUNT_TASKS, {"ws": workspace}))


async def timeline(
    conn: Connection,
    workspace: str,
    *,
    agent: str | None,
    task_key: str | None,
    thread: str | None,
    status: str | None,
    text: Terms | None,
    before_seq: int | None,
    limit: int,
) -> list[ProgressRow]:
    """Progress entries newest first, filtered; `text`: a full-text query their summary or details match."""
    params: dict[str, Any] = {"ws": workspace, "agent": agent, "task_key": task_key, "thread": thread,
                              "status": status, "before_seq": before_seq, "limit": limit}  # fmt: skip
    if text is not None:
        params.update(text.params(conn.dialect))
    query = timeline_query(*(params[k] is not None for k in ("agent", "task_key", "thread", "status")),
                           text.shape if text is not None else None, before_seq is not None)  # fmt: skip
    try:
        return await conn.fetch_all(query, {k: v for k, v in params.items() if v is not None})
    except Exception as exc:
        if text is None:
            raise
        raise search_refused(exc) from None


async def last_seen(conn: Connection, workspace: str) -> dict[str, float]:
    """When each agent last did something the database keeps: a recent progress entry (of the newest
    `RECENT_ENTRIES`), a checkpoint, or a change to a task it holds or held."""
    rows = await conn.fetch_all(LAST_SEEN, {"ws": workspace, "recent": RECENT_ENTRIES})
    return {r.agent: float(r.at) for r in rows}


async def claimed(conn: Connection, workspace: str) -> list:
    """Every task held under a lease (expired ones included), the lease that runs out first first."""
    return await conn.fetch_all(CLAIMED, {"ws": workspace})


async def counts_by_workspace(conn: Connection) -> list[tuple[str, str, bool, int]]:
    """(workspace, status, blocked, tasks) over the whole database, for the metrics."""
    return [(r.workspace, r.status, bool(r.blocked), int(r.n)) for r in await conn.fetch_all(COUNTS_BY_WORKSPACE)]


async def expired_leases_by_workspace(conn: Connection, at: float) -> list[tuple[str, int]]:
    """(workspace, leases past their time that nobody has taken over yet), for the metrics."""
    return [(r.workspace, int(r.n)) for r in await conn.fetch_all(EXPIRED_LEASES_BY_WORKSPACE, {"now": at})]
