"""Reads for the operator console and the metrics: board columns, what tasks wait on, the dependency
graph, the filtered timeline, who was seen when. Named queries (`oversight/store/console.sql`) on a `read()`
connection, like the hot paths; each runs when a person opens a page or a scraper asks. The filtered
table, timeline and event window come in shapes a person picks: built here (`*_query`), once per shape."""

from __future__ import annotations

import json
from functools import cache
from typing import Any

from mcp_harness.progress import store as progress
from mcp_harness.progress.store import SCOPED_PROGRESS
from mcp_harness.store import named
from mcp_harness.store.connection import Connection, Query, array, columns
from mcp_harness.store.records import ProgressRow, TaskEventRow, TaskRecord, TaskTableRow
from mcp_harness.store.search import PROGRESS_TEXT, Shape, Terms, search_refused, tsquery
from mcp_harness.tasks.rules import BLOCKED, BOARD_ORDER, Status
from mcp_harness.tasks.store.queries import ONE_TAG, tagged

Q = named.load("console")
FILTERS = named.load("console_filters")


# -- the console's filtered reads ------------------------------------------------------------------
# Built: a person picks the filters, and the table's sort column and direction (from `TABLE_SORTS`).

#: the task table's sort keys (a whitelist: each is a column, the key of the table's headers)
TABLE_SORTS = {
    "key": '"key"',
    "status": "status",
    "owner": "owner",
    "priority": "priority",
    "updated": "updated_at",
    "created": "id",
}
#: the table's statuses that are not a stored status (`blocked`: pending behind a failed dependency)
TABLE_STATUS = {
    BLOCKED: "status = 'pending' AND blocked = TRUE",
    Status.PENDING.value: "status = 'pending' AND blocked = FALSE",
}


@cache
def task_table_query(status: str | None, owner: bool, tag: bool, sort: str, descending: bool, count: bool) -> Query:
    """The console's task table (or, `count`, how many rows it has): `status` (one of `TABLE_STATUS`, else
    `:status`), `:owner`, `:tag`, sorted by `TABLE_SORTS[sort]`."""
    where = ["workspace = :ws"]
    if status is not None:
        where.append(TABLE_STATUS.get(status, "status = :status"))
    if owner:
        where.append("owner = :owner")

    if tag:
        where.append(tagged(ONE_TAG))
    if count:
        return Query(f"SELECT count(*) FROM tasks WHERE {' AND '.join(where)}", name="console_task_table_count")
    order = f"{TABLE_SORTS[sort]} {'DESC' if descending else 'ASC'}, id"
    sql = f"SELECT {columns(TaskTableRow)} FROM tasks WHERE {' AND '.join(where)} ORDER BY {order} LIMIT :limit"
    sql += " OFFSET :offset"
    return Query(sql, row=TaskTableRow, name=f"console_task_table({status}, {owner}, {tag}, {sort}, {descending})")


@cache
def events_window_query(agent: bool, task_key: bool, since: bool) -> Query:
    """Task events newest first (by time; one task's by id) up to `:until` (and from `:since`), by `:agent`
    and `:task_key` when asked."""
    # one task's: `+created_at` (no index on it) keeps SQLite, which has no statistics, on the task's index
    at = "+created_at" if task_key else "created_at"
    where = ["workspace = :ws", f"{at} <= :until"]
    where += [
        c for c, on in (("actor = :agent", agent), ("task_key = :task_key", task_key), (f"{at} >= :since", since)) if on
    ]
    # newest first by time, the order ix_task_event_time (or, for an agent, ix_task_event_actor) holds them in,
    # so the window is read, not sorted; one task's events are read from ix_task_event_task, in id order
    order = "id DESC" if task_key else "created_at DESC, id DESC"
    sql = f"SELECT {columns(TaskEventRow)} FROM task_events WHERE {' AND '.join(where)} ORDER BY {order} LIMIT :limit"
    return Query(sql, row=TaskEventRow, name=f"console_events_window({agent}, {task_key}, {since})")


@cache
def timeline_query(
    agent: bool, task_key: bool, thread: bool, status: bool, text: Shape | None, before: bool, scoped: bool = False
) -> Query:
    """Progress entries newest first, with the filters asked for; `text`: the shape of a full-text query
    (`search.py`) the entries must match; `scoped` (PostgreSQL, with `text`): a small workspace, read
    apart (`SCOPED_PROGRESS`)."""
    where = ["workspace = :ws"]
    where += [
        f"{c} = :{c}"
        for c, on in (("agent", agent), ("task_key", task_key), ("thread", thread), ("status", status))
        if on
    ]
    if before:
        where.append("seq < :before_seq")
    head = f"SELECT {columns(ProgressRow)} FROM progress WHERE "
    tail = " ORDER BY seq DESC LIMIT :limit"
    sqlite = head + " AND ".join(where) + tail
    postgresql = None
    if text is not None:
        sqlite = head + " AND ".join([*where, "id IN (SELECT rowid FROM progress_fts WHERE progress_fts MATCH :q)"])
        pg_head = head.replace("FROM progress", f"FROM {SCOPED_PROGRESS} AS p") if scoped else head
        postgresql = pg_head + " AND ".join([*where, f"{PROGRESS_TEXT} @@ ({tsquery(text)})"]) + tail
        sqlite += tail
    name = f"console_timeline({agent}, {task_key}, {thread}, {status}, {text}, {before}, {scoped})"
    return Query(sqlite, postgresql=postgresql, row=ProgressRow, name=name)


#: each board column's query (`blocked`: pending behind a failed dependency)
COLUMN = {status: Q[f"board_{status}"] for status in BOARD_ORDER}
#: (workspace, agent) seen in this many newest progress entries count for "last seen"
RECENT_ENTRIES = 5000
RECENT_EVENTS = 1000  #: task events `last_seen` reads (the newest): who ended a hold lately
MAX_ID = 2**62  #: above every id: the first page of a list paged by id


async def workspace_names(conn: Connection) -> list[str]:
    """Every workspace with data: the workspace rows (progress, checkpoints) and the workspaces of tasks,
    found by skipping through the task key index (one probe per workspace, not a scan)."""
    names = {row.name for row in await conn.fetch_all(Q.workspace_rows)}
    name = await conn.fetch_value(Q.first_task_workspace)
    while name is not None:
        names.add(name)
        name = await conn.fetch_value(Q.next_task_workspace, {"after": name})
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
    return await conn.fetch_all(Q.open_dependencies, params)


async def cancel_reasons(conn: Connection, workspace: str, keys: list[str]) -> dict[str, str]:
    """For each of `keys` that was cancelled, the reason its latest cancel gave (the task events keep it)."""
    if not keys:
        return {}
    rows = await conn.fetch_all(Q.cancel_reasons, {"ws": workspace, "keys": array(conn.dialect, keys)})
    return {r.task_key: json.loads(r.detail or "{}").get("reason") for r in rows}  # the latest wins


async def dependencies(
    conn: Connection, workspace: str, key: str, *, reverse: bool, limit: int = 1000, offset: int = 0
) -> tuple[list, int]:
    """A page of the tasks `key` depends on (or, `reverse`, the tasks that depend on it): key, title, status,
    blocked, owner; and how many there are in all."""
    params = {"ws": workspace, "key": key}
    page = {**params, "limit": limit, "offset": offset}
    rows = await conn.fetch_all(Q.dependents if reverse else Q.dependencies, page)
    total = await conn.fetch_value(Q.count_dependents if reverse else Q.count_dependencies, params)
    return rows, int(total)


async def task_events(conn: Connection, workspace: str, key: str, *, before_id: int | None, limit: int) -> list:
    """A task's newest `limit` events (before event `before_id`), newest first."""
    params = {"ws": workspace, "key": key, "before": before_id or MAX_ID, "limit": limit}
    return await conn.fetch_all(Q.task_events_page, params)


async def graph(
    conn: Connection, workspace: str, limit: int, edge_limit: int = 100_000
) -> tuple[list, list[tuple[str, str]]]:
    """The first `limit` tasks (creation order) and up to `edge_limit` dependency edges (task, dependency)
    among them."""
    nodes = await conn.fetch_all(Q.graph_nodes, {"ws": workspace, "limit": limit})
    keys = {n.key for n in nodes}
    if not keys:
        return nodes, []
    params = {"ws": workspace, "keys": array(conn.dialect, sorted(keys)), "limit": edge_limit}
    rows = await conn.fetch_all(Q.graph_edges, params)
    return nodes, [(r.task_key, r.dep_key) for r in rows]


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
    params: dict[str, Any] = {
        "ws": workspace,
        "agent": agent,
        "task_key": task_key,
        "thread": thread,
        "status": status,
        "before_seq": before_seq,
        "limit": limit,
    }
    if text is not None:
        params.update(text.params(conn.dialect))
    try:
        small = text is not None and conn.dialect != "sqlite" and await progress.scoped(conn, workspace)
        query = timeline_query(
            *(params[k] is not None for k in ("agent", "task_key", "thread", "status")),
            text.shape if text is not None else None,
            before_seq is not None,
            small,
        )
        return await conn.fetch_all(query, {k: v for k, v in params.items() if v is not None})
    except Exception as exc:
        if text is None:
            raise
        raise search_refused(exc) from None


async def last_seen(conn: Connection, workspace: str) -> dict[str, float]:
    """When each agent last did something the database keeps: a recent progress entry (of the newest
    `RECENT_ENTRIES`), a checkpoint, the end of its hold on a task among the newest `RECENT_EVENTS` task events, or a
    change to a task it holds now."""
    rows = await conn.fetch_all(Q.last_seen, {"ws": workspace, "recent": RECENT_ENTRIES, "events": RECENT_EVENTS})
    return {r.agent: float(r.at) for r in rows}


async def claimed(conn: Connection, workspace: str, limit: int = 100_000) -> list:
    """The first `limit` tasks held under a lease (expired ones included), the lease that runs out first first."""
    return await conn.fetch_all(Q.claimed, {"ws": workspace, "limit": limit})


async def counts_by_workspace(conn: Connection) -> list[tuple[str, str, bool, int]]:
    """(workspace, status, blocked, tasks) over the whole database, for the metrics."""
    return [(r.workspace, r.status, bool(r.blocked), int(r.n)) for r in await conn.fetch_all(Q.counts_by_workspace)]


async def expired_leases_by_workspace(conn: Connection, at: float) -> list[tuple[str, int]]:
    """(workspace, leases past their time that nobody has taken over yet), for the metrics."""
    return [(r.workspace, int(r.n)) for r in await conn.fetch_all(Q.expired_leases_by_workspace, {"now": at})]


async def gates_in_review(conn: Connection, workspace: str) -> int:
    """Gates waiting for a person's decision."""
    return int(await conn.fetch_value(Q.gates_in_review, {"ws": workspace}))


async def expired_leases(conn: Connection, workspace: str, at: float) -> int:
    """Leases past their time that nobody has taken over yet."""
    return int(await conn.fetch_value(Q.expired_leases, {"ws": workspace, "now": at}))


async def record_contact(
    conn: Connection, workspace: str, agent: str, at: float, tool: str, claim_outcome: str | None
) -> None:
    """`agent` made a call to `tool` at `at` (and, when `claim_outcome` is given, a claim answered that)."""
    params = {
        "ws": workspace,
        "agent": agent,
        "at": at,
        "tool": tool,
        "outcome": claim_outcome,
        "claim_at": at if claim_outcome is not None else None,
    }
    await conn.execute(Q.record_contact, params)


async def contacts(conn: Connection, workspace: str, limit: int) -> list:
    """The `limit` agents heard from last: agent, seen_at, tool, claim_outcome, claim_at."""
    return await conn.fetch_all(Q.contacts, {"ws": workspace, "limit": limit})


async def silent_holders(conn: Connection, workspace: str, at: float, quiet_since: float | None, limit: int) -> list:
    """Leases still running whose holder has made no call since `quiet_since` (None: for more than half
    the lease), nor changed the
    task (a heartbeat does), `quiet`, and those taken through a stdio server (its `lease_process`, which
    the caller checks): key, owner, lease_expires_at, seen_at (None: never heard from by a server that
    records contacts)."""
    params = {"ws": workspace, "now": at, "quiet": quiet_since, "limit": limit}
    return await conn.fetch_all(Q.silent_holders, params)


async def holding_back(conn: Connection, workspace: str, status: str, scan: int, limit: int) -> list:
    """Tasks of `status` that others depend on, most depended on first (among the first `scan`)."""
    params = {"ws": workspace, "status": status, "scan": scan, "limit": limit}
    return await conn.fetch_all(Q.holding_back, params)


async def holding_dependency(conn: Connection, workspace: str, key: str) -> Any:
    """The open dependency that holds `key` back most directly (a failure, else a blocked one), or None."""
    return await conn.fetch_one(Q.holding_dependency, {"ws": workspace, "key": key})


async def waiting_on(conn: Connection, workspace: str, key: str, cap: int) -> int:
    """How many tasks wait on `key`, directly or through other tasks (at most `cap` are counted)."""
    return int(await conn.fetch_value(Q.waiting_on, {"ws": workspace, "key": key, "cap": cap}))


async def recent_task_events(conn: Connection, workspace: str, limit: int) -> list:
    """The workspace's newest `limit` task events (task_key, kind, created_at), oldest first."""
    rows = await conn.fetch_all(Q.recent_task_events, {"ws": workspace, "limit": limit})
    return rows[::-1]


async def created_at(conn: Connection, workspace: str, keys: list[str]) -> dict[str, float]:
    if not keys:
        return {}
    rows = await conn.fetch_all(Q.created_at, {"ws": workspace, "keys": array(conn.dialect, keys)})
    return {r.key: float(r.created_at) for r in rows}


async def first_created(conn: Connection, workspace: str) -> float | None:
    value = await conn.fetch_value(Q.first_created, {"ws": workspace})
    return None if value is None else float(value)


async def burn_up(conn: Connection, workspace: str, t0: float, step: float) -> tuple[dict[int, int], dict[int, int]]:
    """Tasks created and tasks done per time bucket (`step` seconds from `t0`)."""
    params = {"ws": workspace, "t0": t0, "step": step}
    created = {int(r.b): int(r.n) for r in await conn.fetch_all(Q.created_by_bucket, params)}
    done = {int(r.b): int(r.n) for r in await conn.fetch_all(Q.done_by_bucket, params)}
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
    used = {k: v for k, v in params.items() if v is not None and not (k == "status" and v in TABLE_STATUS)}
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
    review = [(r.workspace, float(r.since)) for r in await conn.fetch_all(Q.oldest_in_review)]
    ready = [(r.workspace, float(r.since)) for r in await conn.fetch_all(Q.oldest_ready, {"now": at})]
    return review, ready


async def thread_names(conn: Connection, workspace: str, limit: int) -> list[str]:
    """The workspace's first `limit` threads by name."""
    return [r.name for r in await conn.fetch_all(FILTERS.thread_names, {"ws": workspace, "limit": limit})]


async def recent_actors(conn: Connection, workspace: str, limit: int) -> list[str]:
    """Who made the workspace's newest `limit` task events, by name."""
    return [r.actor for r in await conn.fetch_all(FILTERS.recent_actors, {"ws": workspace, "limit": limit})]
