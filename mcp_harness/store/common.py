"""Workspace rows, which every store module that writes a workspace's first row needs."""

from __future__ import annotations

from mcp_harness.clock import now  # the one source of time (re-exported for the store and services)
from mcp_harness.store import named
from mcp_harness.store.connection import Connection

Q = named.load("workspaces")

__all__ = ["ensure_workspace", "next_progress_seq", "now"]


async def ensure_workspace(conn: Connection, workspace: str) -> None:
    await conn.execute(Q.ensure_workspace, {"ws": workspace, "at": now()})


async def next_progress_seq(conn: Connection, workspace: str) -> int:
    """Hand out the workspace's next progress `seq`. The row lock this takes (or SQLite's write lock)
    is held to commit, so values commit in the order they were handed out."""
    value = await conn.fetch_value(Q.next_progress_seq, {"ws": workspace})
    if value is None:  # first write in this workspace
        await ensure_workspace(conn, workspace)
        value = await conn.fetch_value(Q.next_progress_seq, {"ws": workspace})
    return int(value)
