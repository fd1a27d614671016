"""Per-thread JSON Schemas."""

from __future__ import annotations

from mcp_harness.store import named
from mcp_harness.store.connection import Connection

Q = named.load("schemas")


async def add(conn: Connection, workspace: str, thread: str, schema_json: str, at: float) -> int:
    """Register a schema as the thread's next version; returns the version."""
    version = int(await conn.fetch_value(Q.next_schema_version, {"ws": workspace, "thread": thread}))
    params = {"ws": workspace, "thread": thread, "version": version, "document": schema_json, "at": at}
    await conn.execute(Q.insert_schema, params)
    return version
