"""The shared task list: all of its SQL.

A claim is one `UPDATE ... WHERE id = (SELECT ... ORDER BY priority DESC, id LIMIT 1 [FOR UPDATE SKIP
LOCKED]) RETURNING ...` statement. `ready` and `blocked` are kept current in the transaction that changes
a dependency, so the claim scan only ever touches tasks that can run.
"""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Select, Update, and_, bindparam, false, func, or_, select, text, true, update
from sqlalchemy.engine import RowMapping
from sqlalchemy.ext.asyncio import AsyncConnection

from .raw import prebuilt
from .tables import Task, TaskDep, TaskTag

tasks = Task.__table__
deps = TaskDep.__table__
task_tags = TaskTag.__table__

OPEN = ("pending", "claimed")  #: statuses in which a task may be `ready`


def _tagged(workspace: Any, tags: Any):
    """Tasks carrying one of `tags` (values, or bind parameters in prebuilt statements)."""
    return tasks.c.id.in_(
        select(task_tags.c.task_id).where(task_tags.c.workspace == workspace, task_tags.c.tag.in_(tags))
    )


def _where(workspace: str, tags: list[str] | None, task_key: str | None) -> list[Any]:
    clauses: list[Any] = [tasks.c.workspace == workspace]
    if tags:
        clauses.append(_tagged(workspace, tags))
    if task_key is not None:
        clauses.append(tasks.c.key == task_key)
    return clauses


_GET = prebuilt(select(tasks).where(tasks.c.workspace == bindparam("p_ws"), tasks.c.key == bindparam("p_key")))


async def get(conn: AsyncConnection, workspace: str, key: str) -> RowMapping | None:
    return (await conn.execute(_GET, {"p_ws": workspace, "p_key": key})).mappings().first()


async def get_many(conn: AsyncConnection, workspace: str, keys: list[str]) -> dict[str, RowMapping]:
    out: dict[str, RowMapping] = {}
    unique = list(dict.fromkeys(keys))
    for start in range(0, len(unique), 500):
        stmt = select(tasks).where(tasks.c.workspace == workspace, tasks.c.key.in_(unique[start : start + 500]))
        for row in (await conn.execute(stmt)).mappings():
            out[row["key"]] = row
    return out


async def insert(conn: AsyncConnection, workspace: str, rows: list[dict[str, Any]]) -> None:
    """Insert new tasks with their dependency edges and tags (rows carry `_deps` and `_tags`)."""
    for row in rows:
        dep_keys, tag_list = row.pop("_deps"), row.pop("_tags")
        task_id = (await conn.execute(tasks.insert().values(**row).returning(tasks.c.id))).scalar_one()
        if dep_keys:
            await conn.execute(
                deps.insert(), [{"workspace": workspace, "task_key": row["key"], "dep_key": d} for d in dep_keys]
            )
        if tag_list:
            await conn.execute(
                task_tags.insert(), [{"workspace": workspace, "tag": t, "task_id": task_id} for t in tag_list]
            )


async def refresh_statistics(conn: AsyncConnection) -> None:
    """PostgreSQL: ANALYZE the task tables. Without statistics (autovacuum off, or not run yet) the
    planner takes the task list for tiny and answers a claim with a bitmap scan over every pending
    task plus a sort, instead of reading the first entry of `ix_task_claim`: O(n) per claim. SQLite
    plans by its indexes without statistics and needs nothing here."""
    if conn.dialect.name == "postgresql":
        await conn.execute(_ANALYZE, {})


_ANALYZE = prebuilt(text("ANALYZE tasks, task_deps, task_tags"))


async def add_dependents(conn: AsyncConnection, workspace: str, counts: dict[str, int]) -> None:
    """Existing tasks gained `counts[key]` new dependents."""
    for key, n in counts.items():
        await conn.execute(
            update(tasks)
            .where(tasks.c.workspace == workspace, tasks.c.key == key)
            .values(dependents=tasks.c.dependents + n)
        )


async def fail_expired_exhausted(conn: AsyncConnection, workspace: str, now: float) -> list[str]:
    """Leases that ran out on their last attempt: the task fails. Returns the keys."""
    stmt = (
        update(tasks)
        .where(
            tasks.c.workspace == workspace,
            tasks.c.status == "claimed",
            tasks.c.lease_expires_at <= now,
            tasks.c.attempts >= tasks.c.max_attempts,
        )
        .values(
            status="failed",
            ready=False,
            lease_token=None,
            last_error="the lease expired on the last allowed attempt",
            updated_at=now,
        )
        .returning(tasks.c.key)
    )
    return list((await conn.execute(stmt)).scalars())


@cache
def _candidate(by_tags: bool, by_key: bool, lock: bool) -> Select:
    """The best claimable task: open and runnable (ix_task_claim), pending past its backoff or
    claimed with a lease that ran out and attempts left, highest priority first, then oldest."""
    now = bindparam("p_now")
    where = [tasks.c.workspace == bindparam("p_ws"), tasks.c.ready == true()]
    if by_tags:
        where.append(_tagged(bindparam("p_ws"), bindparam("p_tags", expanding=True)))
    if by_key:
        where.append(tasks.c.key == bindparam("p_key"))
    stmt = (
        select(tasks.c.id)
        .where(
            *where,
            or_(
                and_(tasks.c.status == "pending", tasks.c.available_at <= now),
                and_(
                    tasks.c.status == "claimed",
                    tasks.c.lease_expires_at <= now,
                    tasks.c.attempts < tasks.c.max_attempts,
                ),
            ),
        )
        .order_by(tasks.c.priority.desc(), tasks.c.id)
        .limit(1)
    )
    # PostgreSQL: skip rows another claim holds; SQLite's BEGIN IMMEDIATE already excludes others.
    return prebuilt(stmt.with_for_update(skip_locked=True) if lock else stmt)


@cache
def _claim_statement(by_tags: bool, by_key: bool) -> Update:
    """The claim, built once per shape: a prebuilt statement skips SQLAlchemy's per-call
    construction and cache-key work, which cost more than the SQL itself on SQLite."""
    now = bindparam("p_now")
    return prebuilt(
        update(tasks)
        .where(tasks.c.id == _candidate(by_tags, by_key, True).scalar_subquery())
        .values(
            status="claimed",
            owner=bindparam("p_agent"),
            lease_token=bindparam("p_token"),
            lease_expires_at=bindparam("p_expires"),
            lease_seconds=bindparam("p_lease"),
            attempts=tasks.c.attempts + 1,
            updated_at=now,
        )
        .returning(*tasks.c)
    )


def _filter_params(params: dict[str, Any], tags: list[str] | None, task_key: str | None) -> dict[str, Any]:
    if tags:
        params["p_tags"] = list(tags)
    if task_key is not None:
        params["p_key"] = task_key
    return params


async def claimable_exists(
    conn: AsyncConnection, workspace: str, *, now: float, tags: list[str] | None, task_key: str | None
) -> bool:
    """Whether a claim would get a task now: a cheap read that waiting claims poll."""
    stmt = _candidate(bool(tags), task_key is not None, False)
    params = _filter_params({"p_ws": workspace, "p_now": now}, tags, task_key)
    return (await conn.execute(stmt, params)).first() is not None


async def claim(
    conn: AsyncConnection,
    workspace: str,
    *,
    agent: str,
    token: str,
    now: float,
    lease_seconds: int,
    tags: list[str] | None,
    task_key: str | None,
) -> RowMapping | None:
    """Atomically take the best claimable task (or the named one): ONE statement."""
    params = {"p_ws": workspace, "p_now": now, "p_agent": agent, "p_token": token,
              "p_expires": now + lease_seconds, "p_lease": lease_seconds}  # fmt: skip
    stmt = _claim_statement(bool(tags), task_key is not None)
    _filter_params(params, tags, task_key)
    return (await conn.execute(stmt, params)).mappings().first()


@cache
def _leased_update(columns: tuple[str, ...], leaf_only: bool) -> Update:
    where = [
        tasks.c.workspace == bindparam("p_ws"),
        tasks.c.key == bindparam("p_key"),
        tasks.c.status == "claimed",
        tasks.c.lease_token == bindparam("p_token"),
    ]
    if leaf_only:
        where.append(tasks.c.dependents == 0)
    return prebuilt(update(tasks).where(*where).values({c: bindparam(f"v_{c}") for c in columns}).returning(*tasks.c))


async def update_leased(
    conn: AsyncConnection, workspace: str, key: str, token: str, values: dict[str, Any], *, leaf_only: bool = False
) -> RowMapping | None:
    """Change a claimed task only if `token` is its current lease (the fence). None if it is not
    (with `leaf_only`, also None if other tasks depend on it)."""
    columns = tuple(sorted(values))
    params = {"p_ws": workspace, "p_key": key, "p_token": token, **{f"v_{c}": values[c] for c in columns}}
    return (await conn.execute(_leased_update(columns, leaf_only), params)).mappings().first()


async def update_where_status(
    conn: AsyncConnection, workspace: str, key: str, statuses: tuple[str, ...], values: dict[str, Any]
) -> RowMapping | None:
    stmt = (
        update(tasks)
        .where(tasks.c.workspace == workspace, tasks.c.key == key, tasks.c.status.in_(statuses))
        .values(**values)
        .returning(*tasks.c)
    )
    return (await conn.execute(stmt)).mappings().first()


_DEPENDENTS = select(deps.c.task_key).where(
    deps.c.workspace == bindparam("p_ws"), deps.c.dep_key.in_(bindparam("p_keys", expanding=True))
)


REVOKED_BY_REOPEN = "a dependency was reopened; the lease was revoked"


async def propagate(conn: AsyncConnection, workspace: str, changed: list[str]) -> None:
    """Recompute `ready`/`blocked` of everything downstream of `changed` tasks, transitively.

    A claimed task whose dependency is no longer done (it was reopened) loses its lease: it goes
    back to pending with the attempt given back, so no task is ever held while a dependency is not
    done; its holder's next call gets `lease_lost`."""
    queue = list(changed)
    while queue:
        dependents = list((await conn.execute(_DEPENDENTS, {"p_ws": workspace, "p_keys": queue})).scalars().unique())
        queue = []
        if not dependents:
            break
        flags = await compute_flags(conn, workspace, dependents)
        current = await get_many(conn, workspace, dependents)
        for key, (deps_done, blocked) in flags.items():
            row = current[key]
            ready = deps_done and row["status"] in OPEN
            values: dict[str, Any] = {"ready": ready, "blocked": blocked}
            if row["status"] == "claimed" and not deps_done:
                values.update(
                    status="pending", owner=None, lease_token=None, lease_expires_at=None,
                    attempts=max(0, row["attempts"] - 1), last_error=REVOKED_BY_REOPEN,
                )  # fmt: skip
            if bool(row["ready"]) != ready or bool(row["blocked"]) != blocked or "status" in values:
                await conn.execute(
                    update(tasks).where(tasks.c.workspace == workspace, tasks.c.key == key).values(**values)
                )
                if bool(row["blocked"]) != blocked:
                    queue.append(key)


async def compute_flags(conn: AsyncConnection, workspace: str, keys: list[str]) -> dict[str, tuple[bool, bool]]:
    """(every dependency done, a dependency failed or is blocked) for each task."""
    dep_task = tasks.alias("dep_task")
    stmt = (
        select(deps.c.task_key, dep_task.c.status, dep_task.c.blocked)
        .join(dep_task, and_(dep_task.c.workspace == deps.c.workspace, dep_task.c.key == deps.c.dep_key))
        .where(deps.c.workspace == workspace, deps.c.task_key.in_(keys))
    )
    flags = {key: (True, False) for key in keys}
    for task_key, status, blocked in await conn.execute(stmt):
        ready, is_blocked = flags[task_key]
        flags[task_key] = (ready and status == "done", is_blocked or status == "failed" or bool(blocked))
    return flags


_COUNTS = prebuilt(
    select(tasks.c.status, tasks.c.blocked, func.count())
    .where(tasks.c.workspace == bindparam("p_ws"))
    .group_by(tasks.c.status, tasks.c.blocked)
)


async def counts(conn: AsyncConnection, workspace: str) -> dict[str, int]:
    """Tasks per status over the whole workspace; pending tasks with a failed dependency are `blocked`."""
    out = {"pending": 0, "claimed": 0, "done": 0, "failed": 0, "blocked": 0}
    for status, blocked, n in await conn.execute(_COUNTS, {"p_ws": workspace}):
        out["blocked" if status == "pending" and blocked else status] += int(n)
    return out


async def why_nothing(
    conn: AsyncConnection, workspace: str, *, now: float, tags: list[str] | None, task_key: str | None
) -> dict[str, Any]:
    """Facts behind an empty claim: pending-but-waiting, live claims, backoff, finished, total."""
    where = _where(workspace, tags, task_key)
    pending = tasks.c.status == "pending"
    stmt = select(
        func.count(),
        func.count().filter(and_(pending, tasks.c.ready == false())),
        func.count().filter(tasks.c.status == "claimed"),
        func.count().filter(tasks.c.status.in_(("done", "failed"))),
        func.min(tasks.c.available_at).filter(and_(pending, tasks.c.ready == true(), tasks.c.available_at > now)),
    ).where(*where)
    total, waiting, claimed, finished, next_available = (await conn.execute(stmt)).one()
    return {
        "total": int(total),
        "waiting_on_deps": int(waiting),
        "claimed": int(claimed),
        "finished": int(finished),
        "next_available_at": next_available,
    }


_HELD_BY = prebuilt(
    select(tasks)
    .where(tasks.c.workspace == bindparam("p_ws"), tasks.c.owner == bindparam("p_agent"), tasks.c.status == "claimed")
    .order_by(tasks.c.id)
)


async def held_by(conn: AsyncConnection, workspace: str, agent: str) -> list[RowMapping]:
    """Tasks this agent holds a lease on now (expired but not re-claimed included)."""
    return list((await conn.execute(_HELD_BY, {"p_ws": workspace, "p_agent": agent})).mappings())


async def page(
    conn: AsyncConnection,
    workspace: str,
    *,
    statuses: list[str] | None,
    tag: str | None,
    limit: int,
    after_id: int,
) -> list[RowMapping]:
    """Tasks in creation order. `statuses` may include `blocked` (pending with a failed dependency)."""
    stmt = select(tasks).where(*_where(workspace, [tag] if tag else None, None), tasks.c.id > after_id)
    if statuses:
        ors = []
        for status in statuses:
            if status == "blocked":
                ors.append(and_(tasks.c.status == "pending", tasks.c.blocked == true()))
            elif status == "pending":
                ors.append(and_(tasks.c.status == "pending", tasks.c.blocked == false()))
            else:
                ors.append(tasks.c.status == status)
        stmt = stmt.where(or_(*ors))
    return list((await conn.execute(stmt.order_by(tasks.c.id).limit(limit))).mappings())
