"""Per-thread JSON Schemas."""

from __future__ import annotations

from . import queries as q
from .connection import Connection


async def add(conn: Connection, workspace: str, thread: str, schema_json: str, at: float) -> int:
    """Register a schema as the thread's next version; returns the version."""
    version = int(await conn.fetch_value(q.NEXT_SCHEMA_VERSION, {"ws": workspace, "thread": thread}))
    params = {"ws": workspace, "thread": thread, "version": version, "document": schema_json, "at": at}
    await conn.execute(q.INSERT_SCHEMA, params)
    return version
