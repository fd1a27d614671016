"""Reads for the operator console and the metrics: board columns, what tasks wait on, the dependency
graph, the filtered timeline, who was seen when. Literal SQL on a `read()` connection, like the hot
paths; each runs when a person opens a page or a scraper asks."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from ..task_states import BLOCKED
from ..task_states import Status as S
from . import named
from .connection import Connection, Query, array
from .queries import _both, columns, in_array
from .records import ProgressRow, TaskEventRow, TaskRecord
from .search import PROGRESS_TEXT, Terms, search_refused, tsquery

FILTERS = named.load("console_filters")

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
        f"SELECT {_TASK} FROM tasks WHERE workspace = :ws AND {where} ORDER BY {order} LIMIT :limit OFFSET :offset",
        row=TaskRecord,
        name=f"console_column_{status}",
    )  # fmt: skip
    for status, (where, order) in _ORDER.items()
}
#: (workspace, agent) seen in this many newest progress entries count for "last seen"
RECENT_ENTRIES = 5000
MAX_ID = 2**62  #: above every id: the first page of a list paged by id

WORKSPACE_ROWS = Query("SELECT name FROM workspaces")
FIRST_TASK_WORKSPACE = Query("SELECT min(workspace) FROM tasks")
NEXT_TASK_WORKSPACE = Query("SELECT min(workspace) FROM tasks WHERE workspace > :after")
OPEN_DEPENDENCIES = _both(
    lambda d: (
        'SELECT task_key, "key", status, blocked, owner, n FROM ('
        'SELECT d.task_key, t."key", t.status, t.blocked, t.owner, t.id, '
        "row_number() OVER (PARTITION BY d.task_key ORDER BY t.id) AS place, "
        "count(*) OVER (PARTITION BY d.task_key) AS n FROM task_deps AS d "
        'JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key '
        f"WHERE d.workspace = :ws AND t.status NOT IN ('done', 'cancelled') AND {in_array('d.task_key', 'keys', d)}"
        ") AS open_deps WHERE place <= :per_task ORDER BY task_key, id"
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
    'ON d.workspace = t.workspace AND d.{other} = t."key" WHERE d.workspace = :ws AND d.{mine} = :key ORDER BY t.id '
    "LIMIT :limit OFFSET :offset"
)
DEPENDENCIES = Query(_DEPENDENCIES.format(mine="task_key", other="dep_key"), name="console_dependencies")
DEPENDENTS = Query(_DEPENDENCIES.format(mine="dep_key", other="task_key"), name="console_dependents")
COUNT_DEPENDENCIES = Query("SELECT count(*) FROM task_deps WHERE workspace = :ws AND task_key = :key")
COUNT_DEPENDENTS = Query("SELECT count(*) FROM task_deps WHERE workspace = :ws AND dep_key = :key")
TASK_EVENTS_PAGE = Query(
    f"SELECT {columns(TaskEventRow)} FROM task_events WHERE workspace = :ws AND task_key = :key "
    "AND id < :before ORDER BY id DESC LIMIT :limit",
    row=TaskEventRow,
    name="console_task_events_page",
)
GRAPH_NODES = Query(
    'SELECT "key", title, status, blocked, owner, priority, kind, review FROM tasks WHERE workspace = :ws '
    "ORDER BY id LIMIT :limit"
)
GRAPH_EDGES = _both(
    lambda d: (
        f"SELECT task_key, dep_key FROM task_deps WHERE workspace = :ws AND {in_array('task_key', 'keys', d)} "
        f"AND {in_array('dep_key', 'keys', d)} LIMIT :limit"
    ),
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
    "WHERE workspace = :ws AND ready = TRUE AND status = 'claimed' ORDER BY lease_expires_at LIMIT :limit"
)
COUNTS_BY_WORKSPACE = Query(
    "SELECT workspace, status, blocked, CAST(sum(n) AS BIGINT) AS n FROM task_counts "
    "GROUP BY workspace, status, blocked"
)
EXPIRED_LEASES_BY_WORKSPACE = Query(
    "SELECT workspace, count(*) AS n FROM tasks WHERE ready = TRUE AND status = 'claimed' "
    "AND lease_expires_at <= :now GROUP BY workspace"
)

GATES_IN_REVIEW = Query(
    "SELECT count(*) FROM tasks WHERE workspace = :ws AND status = 'in_review' AND blocked = FALSE AND kind = 'gate'"
)
EXPIRED_LEASES = Query(
    "SELECT count(*) FROM tasks WHERE workspace = :ws AND ready = TRUE AND status = 'claimed' "
    "AND lease_expires_at <= :now"
)

RECORD_CONTACT = Query(
    "INSERT INTO agent_contacts (workspace, agent, seen_at, tool, claim_outcome, claim_at) "
    "VALUES (:ws, :agent, :at, :tool, :outcome, :claim_at) ON CONFLICT (workspace, agent) DO UPDATE SET "
    "seen_at = excluded.seen_at, tool = excluded.tool, "
    "claim_outcome = COALESCE(excluded.claim_outcome, agent_contacts.claim_outcome), "
    "claim_at = COALESCE(excluded.claim_at, agent_contacts.claim_at)",
    name="console_record_contact",
)
CONTACTS = Query(
    "SELECT agent, seen_at, tool, claim_outcome, claim_at FROM agent_contacts WHERE workspace = :ws "
    "ORDER BY seen_at DESC LIMIT :limit",
    name="console_contacts",
)
SILENT_HOLDERS = Query(
    'SELECT t."key", t.owner, t.lease_expires_at, c.seen_at FROM tasks AS t LEFT JOIN agent_contacts AS c '
    "ON c.workspace = t.workspace AND c.agent = t.owner WHERE t.workspace = :ws AND t.ready = TRUE "
    "AND t.status = 'claimed' AND t.lease_expires_at > :now AND t.updated_at < :quiet "
    "AND (c.seen_at IS NULL OR c.seen_at < :quiet) "
    "ORDER BY t.lease_expires_at LIMIT :limit",
    name="console_silent_holders",
)

#: tasks of one status (not blocked) that others wait on, most waited on first, among the first `scan`
#: of that status in board order (bounded at any size)
HOLDING_BACK = Query(
    'SELECT "key", title, status, blocked, owner, kind, review, dependents, ready, lease_expires_at, updated_at, '
    "attempts, max_attempts, last_error FROM (SELECT * FROM tasks WHERE workspace = :ws AND status = :status "
    "AND blocked = FALSE ORDER BY priority DESC, id LIMIT :scan) AS s WHERE dependents > 0 "
    "ORDER BY dependents DESC, id LIMIT :limit",
    name="console_holding_back",
)
#: the dependency of a task that holds it back most directly: a failure first, then a blocked one,
#: then any other that is not settled
HOLDING_DEPENDENCY = Query(
    'SELECT t."key", t.title, t.status, t.blocked, t.owner, t.kind, t.review, t.ready FROM task_deps AS d '
    'JOIN tasks AS t ON t.workspace = d.workspace AND t."key" = d.dep_key '
    "WHERE d.workspace = :ws AND d.task_key = :key AND t.status NOT IN ('done', 'cancelled') "
    "ORDER BY CASE WHEN t.status = 'failed' THEN 0 "
    "WHEN t.blocked = TRUE THEN 1 WHEN t.status = 'pending' THEN 3 ELSE 2 END, t.id LIMIT 1",
    name="console_holding_dependency",
)

#: how many tasks wait on a task, directly or through others (counted up to :cap)
WAITING_ON = Query(
    "WITH RECURSIVE down(k) AS (SELECT task_key FROM task_deps WHERE workspace = :ws AND dep_key = :key "
    "UNION SELECT d.task_key FROM task_deps AS d JOIN down ON d.dep_key = down.k WHERE d.workspace = :ws) "
    "SELECT count(*) FROM (SELECT k FROM down LIMIT :cap) AS capped",
    name="console_waiting_on",
)

RECENT_TASK_EVENTS = Query(
    "SELECT task_key, kind, created_at FROM task_events WHERE workspace = :ws ORDER BY id DESC LIMIT :limit",
    name="console_recent_task_events",
)
CREATED_AT = _both(
    lambda d: 'SELECT "key", created_at FROM tasks WHERE workspace = :ws AND ' + in_array('"key"', "keys", d),
    name="console_created_at",
)
FIRST_CREATED = Query(
    "SELECT created_at FROM tasks WHERE workspace = :ws ORDER BY id LIMIT 1", name="console_first_created"
)
_BUCKET = {
    "sqlite": "CAST(({c} - :t0) / :step AS INTEGER)",
    "postgresql": "CAST(floor(({c} - :t0) / :step) AS INTEGER)",
}
CREATED_BY_BUCKET = _both(
    lambda d: (
        f"SELECT {_BUCKET[d].format(c='created_at')} AS b, count(*) AS n FROM tasks WHERE workspace = :ws "
        "GROUP BY b ORDER BY b"
    ),
    name="console_created_by_bucket",
)
DONE_BY_BUCKET = _both(
    lambda d: (
        f"SELECT {_BUCKET[d].format(c='completed_at')} AS b, count(*) AS n FROM tasks WHERE workspace = :ws "
        "AND status = 'done' AND completed_at IS NOT NULL GROUP BY b ORDER BY b"
    ),
    name="console_done_by_bucket",
)

#: the task table's sort keys (a whitelist: each is a column, the key of the table's headers)
TABLE_SORTS = {"key": '"key"', "status": "status", "owner": "owner", "priority": "priority", "updated": "updated_at",
               "created": "id"}  # fmt: skip
_TABLE_STATUS = {
    "blocked": "status = 'pending' AND blocked = TRUE",
    "pending": "status = 'pending' AND blocked = FALSE",
}


@cache
def task_table_query(status: str | None, owner: bool, tag: bool, sort: str, descending: bool, count: bool) -> Query:
    """The task table's rows (or their count) with the filters asked for, in one fixed statement per shape."""
    where = ["workspace = :ws"]
    if status is not None:
        where.append(_TABLE_STATUS.get(status, "status = :status"))
    if owner:
        where.append("owner = :owner")
    if tag:
        where.append("id IN (SELECT task_id FROM task_tags WHERE workspace = :ws AND tag = :tag)")
    if count:
        return Query(f"SELECT count(*) FROM tasks WHERE {' AND '.join(where)}", name="console_task_table_count")
    order = f"{TABLE_SORTS[sort]} {'DESC' if descending else 'ASC'}, id"
    sql = (
        'SELECT "key", title, status, blocked, owner, priority, tags, attempts, max_attempts, updated_at, kind, review '
        f"FROM tasks WHERE {' AND '.join(where)} ORDER BY {order} LIMIT :limit OFFSET :offset"
    )
    return Query(sql, name=f"console_task_table({status}, {owner}, {tag}, {sort}, {descending})")


@cache
def events_window_query(agent: bool, task_key: bool, since: bool) -> Query:
    """Task events newest first up to a time (and from one), by actor and task when asked."""
    where = ["workspace = :ws", "created_at <= :until"]
    where += [c for c, on in (("actor = :agent", agent), ("task_key = :task_key", task_key),
                              ("created_at >= :since", since)) if on]  # fmt: skip
    sql = f"SELECT {columns(TaskEventRow)} FROM task_events WHERE {' AND '.join(where)} ORDER BY id DESC LIMIT :limit"
    return Query(sql, row=TaskEventRow, name=f"console_events_window({agent}, {task_key}, {since})")


OLDEST_IN_REVIEW = Query(
    "SELECT workspace, min(updated_at) AS since FROM tasks WHERE status = 'in_review' GROUP BY workspace",
    name="console_oldest_in_review",
)
OLDEST_READY = Query(
    "SELECT workspace, min(CASE WHEN available_at > updated_at THEN available_at ELSE updated_at END) AS since "
    "FROM tasks WHERE ready = TRUE AND status = 'pending' AND blocked = FALSE AND available_at <= :now "
    "GROUP BY workspace",
    name="console_oldest_ready",
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


async def column(conn: Connection, workspace: str, status: str, limit: int, offset: int = 0) -> list[TaskRecord]:
    """`limit` tasks of one board column from `offset`, in the order a person reads it: pending and blocked
    in claim order, claimed by the lease that runs out first, done and failed newest first."""
    return await conn.fetch_all(COLUMN[status], {"ws": workspace, "limit": limit, "offset": offset})


async def open_dependencies(conn: Connection, workspace: str, keys: list[str], per_task: int = 1000) -> list:
    """For each of `keys`, its first `per_task` dependencies that are not done yet: task_key, key, status,
    blocked, owner, and `n`, how many it has in all."""
    if not keys:
        return []
    params = {"ws": workspace, "keys": array(conn.dialect, keys), "per_task": per_task}
    return await conn.fetch_all(OPEN_DEPENDENCIES, params)


async def cancel_reasons(conn: Connection, workspace: str, keys: list[str]) -> dict[str, str]:
    """For each of `keys` that was cancelled, the reason its latest cancel gave (the task events keep it)."""
    if not keys:
        return {}
    rows = await conn.fetch_all(CANCEL_REASONS, {"ws": workspace, "keys": array(conn.dialect, keys)})
    return {r.task_key: json.loads(r.detail or "{}").get("reason") for r in rows}  # the latest wins


async def dependencies(
    conn: Connection, workspace: str, key: str, *, reverse: bool, limit: int = 1000, offset: int = 0
) -> tuple[list, int]:
    """A page of the tasks `key` depends on (or, `reverse`, the tasks that depend on it): key, title, status,
    blocked, owner; and how many there are in all."""
    params = {"ws": workspace, "key": key}
    rows = await conn.fetch_all(DEPENDENTS if reverse else DEPENDENCIES, {**params, "limit": limit, "offset": offset})
    total = await conn.fetch_value(COUNT_DEPENDENTS if reverse else COUNT_DEPENDENCIES, params)
    return rows, int(total)


async def task_events(conn: Connection, workspace: str, key: str, *, before_id: int | None, limit: int) -> list:
    """A task's newest `limit` events (before event `before_id`), newest first."""
    params = {"ws": workspace, "key": key, "before": before_id or MAX_ID, "limit": limit}
    return await conn.fetch_all(TASK_EVENTS_PAGE, params)


async def graph(
    conn: Connection, workspace: str, limit: int, edge_limit: int = 100_000
) -> tuple[list, list[tuple[str, str]]]:
    """The first `limit` tasks (creation order) and up to `edge_limit` dependency edges (task, dependency)
    among them."""
    nodes = await conn.fetch_all(GRAPH_NODES, {"ws": workspace, "limit": limit})
    keys = {n.key for n in nodes}
    if not keys:
        return nodes, []
    params = {"ws": workspace, "keys": array(conn.dialect, sorted(keys)), "limit": edge_limit}
    rows = await conn.fetch_all(GRAPH_EDGES, params)
    return nodes, [(r.task_key, r.dep_key) for r in rows]


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


async def claimed(conn: Connection, workspace: str, limit: int = 100_000) -> list:
    """The first `limit` tasks held under a lease (expired ones included), the lease that runs out first first."""
    return await conn.fetch_all(CLAIMED, {"ws": workspace, "limit": limit})


async def counts_by_workspace(conn: Connection) -> list[tuple[str, str, bool, int]]:
    """(workspace, status, blocked, tasks) over the whole database, for the metrics."""
    return [(r.workspace, r.status, bool(r.blocked), int(r.n)) for r in await conn.fetch_all(COUNTS_BY_WORKSPACE)]


async def expired_leases_by_workspace(conn: Connection, at: float) -> list[tuple[str, int]]:
    """(workspace, leases past their time that nobody has taken over yet), for the metrics."""
    return [(r.workspace, int(r.n)) for r in await conn.fetch_all(EXPIRED_LEASES_BY_WORKSPACE, {"now": at})]


async def gates_in_review(conn: Connection, workspace: str) -> int:
    """Gates waiting for a person's decision."""
    return int(await conn.fetch_value(GATES_IN_REVIEW, {"ws": workspace}))


async def expired_leases(conn: Connection, workspace: str, at: float) -> int:
    """Leases past their time that nobody has taken over yet."""
    return int(await conn.fetch_value(EXPIRED_LEASES, {"ws": workspace, "now": at}))


async def record_contact(
    conn: Connection, workspace: str, agent: str, at: float, tool: str, claim_outcome: str | None
) -> None:
    """`agent` made a call to `tool` at `at` (and, when `claim_outcome` is given, a claim answered that)."""
    params = {"ws": workspace, "agent": agent, "at": at, "tool": tool, "outcome": claim_outcome,
              "claim_at": at if claim_outcome is not None else None}  # fmt: skip
    await conn.execute(RECORD_CONTACT, params)


async def contacts(conn: Connection, workspace: str, limit: int) -> list:
    """The `limit` agents heard from last: agent, seen_at, tool, claim_outcome, claim_at."""
    return await conn.fetch_all(CONTACTS, {"ws": workspace, "limit": limit})


async def silent_holders(conn: Connection, workspace: str, at: float, quiet_since: float, limit: int) -> list:
    """Leases still running whose holder has made no call since `quiet_since`, nor changed the task (a
    heartbeat does): key, owner, lease_expires_at, seen_at (None: never heard from by a server that
    records contacts)."""
    params = {"ws": workspace, "now": at, "quiet": quiet_since, "limit": limit}
    return await conn.fetch_all(SILENT_HOLDERS, params)


async def holding_back(conn: Connection, workspace: str, status: str, scan: int, limit: int) -> list:
    """Tasks of `status` that others depend on, most depended on first (among the first `scan`)."""
    params = {"ws": workspace, "status": status, "scan": scan, "limit": limit}
    return await conn.fetch_all(HOLDING_BACK, params)


async def holding_dependency(conn: Connection, workspace: str, key: str) -> Any:
    """The open dependency that holds `key` back most directly (a failure, else a blocked one), or None."""
    return await conn.fetch_one(HOLDING_DEPENDENCY, {"ws": workspace, "key": key})


async def waiting_on(conn: Connection, workspace: str, key: str, cap: int) -> int:
    """How many tasks wait on `key`, directly or through other tasks (at most `cap` are counted)."""
    return int(await conn.fetch_value(WAITING_ON, {"ws": workspace, "key": key, "cap": cap}))


async def recent_task_events(conn: Connection, workspace: str, limit: int) -> list:
    """The workspace's newest `limit` task events (task_key, kind, created_at), oldest first."""
    rows = await conn.fetch_all(RECENT_TASK_EVENTS, {"ws": workspace, "limit": limit})
    return rows[::-1]


async def created_at(conn: Connection, workspace: str, keys: list[str]) -> dict[str, float]:
    if not keys:
        return {}
    rows = await conn.fetch_all(CREATED_AT, {"ws": workspace, "keys": array(conn.dialect, keys)})
    return {r.key: float(r.created_at) for r in rows}


async def first_created(conn: Connection, workspace: str) -> float | None:
    value = await conn.fetch_value(FIRST_CREATED, {"ws": workspace})
    return None if value is None else float(value)


async def burn_up(conn: Connection, workspace: str, t0: float, step: float) -> tuple[dict[int, int], dict[int, int]]:
    """Tasks created and tasks done per time bucket (`step` seconds from `t0`)."""
    params = {"ws": workspace, "t0": t0, "step": step}
    created = {int(r.b): int(r.n) for r in await conn.fetch_all(CREATED_BY_BUCKET, params)}
    done = {int(r.b): int(r.n) for r in await conn.fetch_all(DONE_BY_BUCKET, params)}
    return created, done


async def task_table(
    conn: Connection,
    workspace: str,
    *,
    status: str | None,
    owner: str | None,
    tag: str | None,
    sort: str,
    descending: bool,
    limit: int,
    offset: int,
) -> tuple[list, int]:
    """A page of the workspace's tasks, filtered and sorted (`sort` one of `TABLE_SORTS`), and how many match."""
    params = {"ws": workspace, "status": status, "owner": owner, "tag": tag, "limit": limit, "offset": offset}
    shape = (status, owner is not None, tag is not None, sort, descending)
    used = {k: v for k, v in params.items() if v is not None and not (k == "status" and v in _TABLE_STATUS)}
    rows = await conn.fetch_all(task_table_query(*shape, False), used)
    counted = {k: v for k, v in used.items() if k not in ("limit", "offset")}
    total = await conn.fetch_value(task_table_query(*shape, True), counted)
    return rows, int(total)


async def events_window(
    conn: Connection,
    workspace: str,
    *,
    agent: str | None,
    task_key: str | None,
    since: float | None,
    until: float,
    limit: int,
) -> list:
    """Task events (newest first, at most `limit`) from `since` to `until`, by `agent` and `task_key` if given."""
    params = {"ws": workspace, "agent": agent, "task_key": task_key, "since": since, "until": until, "limit": limit}
    query = events_window_query(agent is not None, task_key is not None, since is not None)
    return await conn.fetch_all(query, {k: v for k, v in params.items() if v is not None})


async def oldest(conn: Connection, at: float) -> tuple[list[tuple[str, float]], list[tuple[str, float]]]:
    """Per workspace, since when the task longest in review has waited, and the task longest ready."""
    review = [(r.workspace, float(r.since)) for r in await conn.fetch_all(OLDEST_IN_REVIEW)]
    ready = [(r.workspace, float(r.since)) for r in await conn.fetch_all(OLDEST_READY, {"now": at})]
    return review, ready


async def recent_actors(conn: Connection, workspace: str, limit: int) -> list[str]:
    """Who made the workspace's newest `limit` task events, by name."""
    return [r.actor for r in await conn.fetch_all(FILTERS.recent_actors, {"ws": workspace, "limit": limit})]
