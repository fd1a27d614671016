"""The cold paths' SQL, through SQLAlchemy over the declared tables: rows out and in for
export/import, and the reads and deletes behind prune. Run inside `Database.cold_read()` /
`cold_write()`. Imported only by the maintenance service (loaded on first use): SQLAlchemy stays out
of a session's calls."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Column, Table, delete, func, select, text
from sqlalchemy.exc import DBAPIError, IntegrityError, OperationalError
from sqlalchemy.ext.asyncio import AsyncConnection

from mcp_harness.errors import InvalidArgument
from mcp_harness.store import named
from mcp_harness.store.tables import (
    AgentSession,
    Blob,
    Checkpoint,
    Message,
    MessageAck,
    Progress,
    Runner,
    Segment,
    StateSchema,
    Task,
    TaskDep,
    TaskEvent,
    TaskTag,
    Thread,
    Workspace,
    table_of,
)

blobs = table_of(Blob)
checkpoints = table_of(Checkpoint)
segments = table_of(Segment)
tasks = table_of(Task)
workspaces = table_of(Workspace)
progress = table_of(Progress)
task_tags = table_of(TaskTag)

#: what a workspace export holds, in the order an import must insert it (internal ids are left out:
#: task and progress row ids are renumbered by the target database; tags follow their task by key;
#: segment ids are exported, and renumbered on import along with the manifests that name them)
EXPORTED: list[tuple[str, Table, tuple[str, ...]]] = [
    ("workspace", workspaces, ()),
    ("thread", table_of(Thread), ()),
    ("blob", blobs, ()),
    ("segment", segments, ()),
    ("checkpoint", checkpoints, ()),
    ("progress", progress, ("id",)),
    # a process of this machine: nothing elsewhere; `stale` is derived again on import, as `ready` is
    ("task", tasks, ("id", "lease_process", "stale")),
    ("task_dep", table_of(TaskDep), ()),
    ("task_event", table_of(TaskEvent), ("id",)),
    ("state_schema", table_of(StateSchema), ()),
    ("message", table_of(Message), ("id",)),
    ("message_ack", table_of(MessageAck), ()),
    ("runner", table_of(Runner), ()),
    ("agent_session", table_of(AgentSession), ()),
]
KINDS = {kind: (table, skip) for kind, table, skip in EXPORTED}


def _ws_column(table: Table) -> Column[Any]:
    return table.c.name if table is workspaces else table.c.workspace


async def export_rows(conn: AsyncConnection, workspace: str) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """Every row of one workspace as (kind, JSON-able columns), in import order."""
    for kind, table, skip in EXPORTED:
        order = [c for c in table.primary_key.columns]
        stmt = select(table).where(_ws_column(table) == workspace).order_by(*order)
        for row in (await conn.execute(stmt)).mappings():
            out = {k: v for k, v in row.items() if k not in skip}
            if kind in ("blob", "segment"):
                out["data"] = bytes(out["data"]).decode()
            yield kind, out
        if kind == "task":
            tag_stmt = (
                select(task_tags.c.tag, tasks.c.key)
                .join(tasks, tasks.c.id == task_tags.c.task_id)
                .where(task_tags.c.workspace == workspace)
                .order_by(tasks.c.key, task_tags.c.tag)
            )
            for tag, key in await conn.execute(tag_stmt):
                yield "task_tag", {"workspace": workspace, "tag": tag, "task_key": key}


async def count_rows(conn: AsyncConnection, workspace: str) -> int:
    """How many records `export_rows` yields for a workspace (a progress bar's total)."""
    total = 0
    for table in [t for _kind, t, _skip in EXPORTED] + [task_tags]:
        stmt = select(func.count()).select_from(table).where(_ws_column(table) == workspace)
        total += (await conn.execute(stmt)).scalar_one()
    return total


async def workspace_has_data(conn: AsyncConnection, workspace: str) -> bool:
    for table in (checkpoints, tasks, progress):
        stmt = select(func.count()).select_from(table).where(table.c.workspace == workspace)
        if (await conn.execute(stmt)).scalar_one():
            return True
    return False


@dataclass
class ImportIds:
    """Ids the target database gave to imported rows that other rows refer to."""

    tasks: dict[tuple[str, str], int] = field(default_factory=dict)  #: (workspace, key) -> task id
    segments: dict[int, int] = field(default_factory=dict)  #: exported segment id -> new id


async def import_row(conn: AsyncConnection, kind: str, row: dict[str, Any], ids: ImportIds) -> None:
    """Insert one exported row (tags are matched to their task by key; segments are renumbered, and
    the caller renumbers the segment ids inside checkpoint manifests with `ids.segments`). A row the
    database refuses (an id another workspace already uses, a number out of a column's range) is
    `invalid_argument`."""
    try:
        await _insert_row(conn, kind, row, ids)
    except IntegrityError:
        raise InvalidArgument(f"this {kind} has an id or key that is already in this database") from None
    except DBAPIError as exc:
        if isinstance(exc, OperationalError) or exc.connection_invalidated:
            raise  # the database, not the row
        reason = str(exc.orig).splitlines()[0][:200] if exc.orig is not None else type(exc).__name__
        raise InvalidArgument(f"the database refused this {kind} ({reason})") from None


async def _insert_row(conn: AsyncConnection, kind: str, row: dict[str, Any], ids: ImportIds) -> None:
    if kind == "task_tag":
        task_id = ids.tasks[(row["workspace"], row["task_key"])]
        await conn.execute(task_tags.insert().values(workspace=row["workspace"], tag=row["tag"], task_id=task_id))
        return
    table, _skip = KINDS[kind]
    values = dict(row)
    if kind in ("blob", "segment"):
        values["data"] = values["data"].encode()
    if kind == "segment":
        old_id = values.pop("id")
        if values.get("prev") is not None:
            values["prev"] = ids.segments[values["prev"]]
        ids.segments[old_id] = (await conn.execute(table.insert().values(**values).returning(table.c.id))).scalar_one()
        return
    if kind == "workspace":
        # the workspace row may exist already (empty workspace, or created by a token): take the counters
        await conn.execute(delete(table).where(table.c.name == values["name"]))
    if kind == "task":
        new_id = (await conn.execute(table.insert().values(**values).returning(table.c.id))).scalar_one()
        ids.tasks[(values["workspace"], values["key"])] = new_id
        return
    await conn.execute(table.insert().values(**values))


async def lock_values(conn: AsyncConnection, workspace: str) -> None:
    """Hold off every save to the workspace until this transaction ends (PostgreSQL: they take
    `checkpoints.sql`'s `save_values_lock`; SQLite: prune's BEGIN IMMEDIATE already does), so that no save commits a
    reference to a value between prune's scan of the manifests and its deletes."""
    if conn.dialect.name == "postgresql":
        await conn.execute(text(named.load("checkpoints").prune_values_lock.sqlite), {"ws": workspace})


async def prunable(conn: AsyncConnection, workspace: str, *, keep_last: int, older_than: float | None) -> list[str]:
    """Checkpoint ids that prune may delete: older than each thread's last `keep_last`, unlabelled,
    and (with `older_than`) created before it."""
    latest = (
        select(checkpoints.c.thread, func.max(checkpoints.c.version).label("top"))
        .where(checkpoints.c.workspace == workspace)
        .group_by(checkpoints.c.thread)
        .subquery()
    )
    stmt = (
        select(checkpoints.c.id)
        .join(latest, latest.c.thread == checkpoints.c.thread)
        .where(
            checkpoints.c.workspace == workspace,
            checkpoints.c.label.is_(None),
            checkpoints.c.version <= latest.c.top - keep_last,
        )
    )
    if older_than is not None:
        stmt = stmt.where(checkpoints.c.created_at < older_than)
    return list((await conn.execute(stmt)).scalars())


async def delete_checkpoints(conn: AsyncConnection, ids: list[str]) -> None:
    for start in range(0, len(ids), 500):
        await conn.execute(delete(checkpoints).where(checkpoints.c.id.in_(ids[start : start + 500])))


async def manifests(conn: AsyncConnection, workspace: str) -> AsyncIterator[str]:
    stmt = select(checkpoints.c.manifest).where(checkpoints.c.workspace == workspace)
    for (manifest,) in await conn.execute(stmt):
        yield manifest


async def delete_unreferenced_blobs(conn: AsyncConnection, workspace: str, referenced: set[str]) -> int:
    """Delete the workspace's values that no remaining checkpoint references; returns how many."""
    stored = list((await conn.execute(select(blobs.c.hash).where(blobs.c.workspace == workspace))).scalars())
    garbage = [h for h in stored if h not in referenced]
    for start in range(0, len(garbage), 500):
        chunk = garbage[start : start + 500]
        await conn.execute(delete(blobs).where(blobs.c.workspace == workspace, blobs.c.hash.in_(chunk)))
    return len(garbage)


async def list_workspaces(conn: AsyncConnection) -> list[str]:
    return list((await conn.execute(select(workspaces.c.name).order_by(workspaces.c.name))).scalars())


async def segment_links(conn: AsyncConnection, workspace: str) -> dict[int, int | None]:
    """id -> prev for every segment of a workspace (what prune walks)."""
    stmt = select(segments.c.id, segments.c.prev).where(segments.c.workspace == workspace)
    return {i: p for i, p in await conn.execute(stmt)}


async def delete_segments(conn: AsyncConnection, workspace: str, ids: list[int]) -> None:
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        await conn.execute(delete(segments).where(segments.c.workspace == workspace, segments.c.id.in_(part)))
