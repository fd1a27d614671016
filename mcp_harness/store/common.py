"""Small statements every store module uses."""

from __future__ import annotations

from functools import cache
from typing import Any

from sqlalchemy import Insert, Table, Update, bindparam, select, update
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.ext.asyncio import AsyncConnection

from ..clock import now  # the one source of time (re-exported for the store and services)
from .raw import prebuilt
from .tables import Workspace

workspaces = Workspace.__table__


__all__ = ["bump_counter", "ensure_workspace", "insert_ignore", "list_workspaces", "now"]


async def insert_ignore(conn: AsyncConnection, table: Table, rows: list[dict[str, Any]]) -> None:
    """Insert rows, skipping any whose primary key already exists (content-addressed values)."""
    if rows:
        await conn.execute(_insert_ignore(table, conn.dialect.name), rows[0] if len(rows) == 1 else rows)


@cache
def _insert_ignore(table: Table, dialect_name: str) -> Insert:
    dialect = postgresql if dialect_name == "postgresql" else sqlite
    return prebuilt(dialect.insert(table).on_conflict_do_nothing())


async def ensure_workspace(conn: AsyncConnection, workspace: str) -> None:
    await insert_ignore(conn, workspaces, [{"name": workspace, "created_at": now()}])


@cache
def _bump(column: str) -> Update:
    col = workspaces.c[column]
    return prebuilt(
        update(workspaces).where(workspaces.c.name == bindparam("p_ws")).values({column: col + 1}).returning(col)
    )


async def bump_counter(conn: AsyncConnection, workspace: str, column: str) -> int:
    """Increment a workspace counter and return its new value. The row lock this takes (or SQLite's
    write lock) is held to commit, so values commit in the order they were handed out."""
    value = (await conn.execute(_bump(column), {"p_ws": workspace})).scalar()
    if value is None:  # first write in this workspace
        await ensure_workspace(conn, workspace)
        value = (await conn.execute(_bump(column), {"p_ws": workspace})).scalar_one()
    return int(value)


async def list_workspaces(conn: AsyncConnection) -> list[str]:
    return list((await conn.execute(select(workspaces.c.name).order_by(workspaces.c.name))).scalars())
