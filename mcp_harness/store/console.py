"""Reads for the operator console and the metrics: board columns, what tasks wait on, the dependency
graph, the filtered timeline, who was seen when. Cold reads (a person opens a page, a scraper asks):
plain SQLAlchemy statements on `read()` connections, nothing on the hot paths."""

from __future__ import annotations

from typing import Any

from sqlalchemy import and_, false, func, or_, select, true, union
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .tables import Checkpoint, Progress, Task, TaskDep, Workspace

tasks = Task.__table__
deps = TaskDep.__table__
progress = Progress.__table__
checkpoints = Checkpoint.__table__
workspaces = Workspace.__table__

#: how each board column is filtered and ordered (`blocked`: pending behind a failed dependency)
_COLUMNS: dict[str, tuple[Any, list[Any]]] = {
    "pending": (and_(tasks.c.status == "pending", tasks.c.blocked == false()), [tasks.c.priority.desc(), tasks.c.id]),
    "claimed": (tasks.c.status == "claimed", [tasks.c.lease_expires_at, tasks.c.id]),
    "blocked": (and_(tasks.c.status == "pending", tasks.c.blocked == true()), [tasks.c.priority.desc(), tasks.c.id]),
    "failed": (tasks.c.status == "failed", [tasks.c.updated_at.desc(), tasks.c.id.desc()]),
    "done": (tasks.c.status == "done", [tasks.c.completed_at.desc(), tasks.c.id.desc()]),
}
#: (workspace, agent) seen in this many newest progress entries count for "last seen"
RECENT_ENTRIES = 5000


async def workspace_names(conn: AsyncConnection) -> list[str]:
    """Every workspace with data: the workspace rows (progress, checkpoints) and the workspaces of tasks,
    found by skipping through the task key index (one probe per workspace, not a scan)."""
    names = set((await conn.execute(select(workspaces.c.name))).scalars())
    name = (await conn.execute(select(func.min(tasks.c.workspace)))).scalar()
    while name is not None:
        names.add(name)
        name = (await conn.execute(select(func.min(tasks.c.workspace)).where(tasks.c.workspace > name))).scalar()
    return sorted(names)


async def column(conn: AsyncConnection, workspace: str, status: str, limit: int) -> list[RowMapping]:
    """The first `limit` tasks of one board column, in the order a person reads it: pending and blocked
    in claim order, claimed by the lease that runs out first, done and failed newest first."""
    where, order = _COLUMNS[status]
    stmt = select(tasks).where(tasks.c.workspace == workspace, where).order_by(*order).limit(limit)
    return list((await conn.execute(stmt)).mappings())


async def open_dependencies(conn: AsyncConnection, workspace: str, keys: list[str]) -> list[RowMapping]:
    """For each of `keys`, its dependencies that are not done yet: task_key, key, status, blocked, owner."""
    if not keys:
        return []
    dep = tasks.alias("dep")
    stmt = (
        select(deps.c.task_key, dep.c.key, dep.c.status, dep.c.blocked, dep.c.owner)
        .join(dep, and_(dep.c.workspace == deps.c.workspace, dep.c.key == deps.c.dep_key))
        .where(deps.c.workspace == workspace, dep.c.status != "done")
        .order_by(deps.c.task_key, dep.c.id)
    )
    out: list[RowMapping] = []
    for start in range(0, len(keys), 500):
        chunk = stmt.where(deps.c.task_key.in_(keys[start : start + 500]))
        out.extend((await conn.execute(chunk)).mappings())
    return out


async def dependencies(conn: AsyncConnection, workspace: str, key: str, *, reverse: bool) -> list[RowMapping]:
    """The tasks `key` depends on (or, `reverse`, the tasks that depend on it): key, status, blocked, owner."""
    mine, other = (deps.c.dep_key, deps.c.task_key) if reverse else (deps.c.task_key, deps.c.dep_key)
    stmt = (
        select(tasks.c.key, tasks.c.title, tasks.c.status, tasks.c.blocked, tasks.c.owner)
        .join(deps, and_(deps.c.workspace == tasks.c.workspace, other == tasks.c.key))
        .where(deps.c.workspace == workspace, mine == key)
        .order_by(tasks.c.id)
    )
    return list((await conn.execute(stmt)).mappings())


async def graph(conn: AsyncConnection, workspace: str, limit: int) -> tuple[list[RowMapping], list[tuple[str, str]]]:
    """The first `limit` tasks (creation order) and the dependency edges (task, dependency) among them."""
    stmt = (
        select(tasks.c.key, tasks.c.title, tasks.c.status, tasks.c.blocked, tasks.c.owner, tasks.c.priority)
        .where(tasks.c.workspace == workspace)
        .order_by(tasks.c.id)
        .limit(limit)
    )
    nodes = list((await conn.execute(stmt)).mappings())
    keys = {n["key"] for n in nodes}
    edges: list[tuple[str, str]] = []
    ordered = sorted(keys)
    for start in range(0, len(ordered), 500):
        chunk = ordered[start : start + 500]
        rows = await conn.execute(
            select(deps.c.task_key, deps.c.dep_key).where(deps.c.workspace == workspace, deps.c.task_key.in_(chunk))
        )
        edges.extend((t, d) for t, d in rows if d in keys)
    return nodes, edges


async def count_tasks(conn: AsyncConnection, workspace: str) -> int:
    stmt = select(func.count()).select_from(tasks).where(tasks.c.workspace == workspace)
    return int((await conn.execute(stmt)).scalar_one())


async def timeline(
    conn: AsyncConnection,
    workspace: str,
    *,
    agent: str | None,
    task_key: str | None,
    thread: str | None,
    status: str | None,
    text: str | None,
    before_seq: int | None,
    limit: int,
) -> list[RowMapping]:
    """Progress entries newest first, filtered; `text` matches summary or details, ignoring case."""
    stmt = select(progress).where(progress.c.workspace == workspace)
    for column_, value in ((progress.c.agent, agent), (progress.c.task_key, task_key),
                           (progress.c.thread, thread), (progress.c.status, status)):  # fmt: skip
        if value is not None:
            stmt = stmt.where(column_ == value)
    if text:
        found = [c.icontains(text, autoescape=True) for c in (progress.c.summary, progress.c.details)]
        stmt = stmt.where(or_(*found))
    if before_seq is not None:
        stmt = stmt.where(progress.c.seq < before_seq)
    return list((await conn.execute(stmt.order_by(progress.c.seq.desc()).limit(limit))).mappings())


async def last_seen(conn: AsyncConnection, workspace: str) -> dict[str, float]:
    """When each agent last did something the database keeps: a recent progress entry (of the newest
    `RECENT_ENTRIES`), a checkpoint, or a change to a task it holds or held."""
    newest = select(workspaces.c.progress_seq).where(workspaces.c.name == workspace).scalar_subquery()
    seen = union(
        select(progress.c.agent.label("agent"), func.max(progress.c.created_at).label("at"))
        .where(progress.c.workspace == workspace, progress.c.seq > newest - RECENT_ENTRIES)
        .group_by(progress.c.agent),
        select(checkpoints.c.agent.label("agent"), func.max(checkpoints.c.created_at).label("at"))
        .where(checkpoints.c.workspace == workspace)
        .group_by(checkpoints.c.agent),
        select(tasks.c.owner.label("agent"), func.max(tasks.c.updated_at).label("at"))
        .where(tasks.c.workspace == workspace, tasks.c.owner.is_not(None))
        .group_by(tasks.c.owner),
    ).subquery()
    stmt = select(seen.c.agent, func.max(seen.c.at)).group_by(seen.c.agent)
    return {agent: float(at) for agent, at in await conn.execute(stmt)}


async def claimed(conn: AsyncConnection, workspace: str) -> list[RowMapping]:
    """Every task held under a lease (expired ones included), the lease that runs out first first."""
    stmt = (
        select(
            tasks.c.key,
            tasks.c.title,
            tasks.c.owner,
            tasks.c.attempts,
            tasks.c.max_attempts,
            tasks.c.lease_expires_at,
            tasks.c.updated_at,
        )  # fmt: skip
        .where(tasks.c.workspace == workspace, tasks.c.ready == true(), tasks.c.status == "claimed")
        .order_by(tasks.c.lease_expires_at)
    )
    return list((await conn.execute(stmt)).mappings())


async def counts_by_workspace(conn: AsyncConnection) -> list[tuple[str, str, bool, int]]:
    """(workspace, status, blocked, tasks) over the whole database, for the metrics."""
    stmt = select(tasks.c.workspace, tasks.c.status, tasks.c.blocked, func.count()).group_by(
        tasks.c.workspace, tasks.c.status, tasks.c.blocked
    )
    return [(w, s, bool(b), int(n)) for w, s, b, n in await conn.execute(stmt)]


async def expired_leases_by_workspace(conn: AsyncConnection, at: float) -> list[tuple[str, int]]:
    """(workspace, leases past their time that nobody has taken over yet), for the metrics."""
    stmt = (
        select(tasks.c.workspace, func.count())
        .where(tasks.c.ready == true(), tasks.c.status == "claimed", tasks.c.lease_expires_at <= at)
        .group_by(tasks.c.workspace)
    )
    return [(w, int(n)) for w, n in await conn.execute(stmt)]
