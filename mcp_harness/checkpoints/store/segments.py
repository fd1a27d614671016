"""Array segments (chains of element runs): see `checkpoints/chains.py`."""

from __future__ import annotations

from mcp_harness.store import named
from mcp_harness.store.connection import Connection
from mcp_harness.store.records import SegmentRow

Q = named.load("segments")


async def add(conn: Connection, workspace: str, prev: int | None, data: bytes) -> int:
    """Store one segment after `prev` (None starts a chain); returns its id."""
    return int(await conn.fetch_value(Q.add_segment, {"ws": workspace, "prev": prev, "data": data}))


async def get(conn: Connection, workspace: str, segment_id: int) -> SegmentRow:
    """One segment: the one before it and its data."""
    row = await conn.fetch_one(Q.segment, {"ws": workspace, "id": segment_id})
    if row is None:
        raise LookupError(f"segment {segment_id} is missing")
    return row


async def chain(conn: Connection, workspace: str, tail: int) -> list[bytes]:
    """The data of every segment from the start of the chain to `tail`, oldest first (one query)."""
    return [row.data for row in await conn.fetch_all(Q.segment_chain, {"ws": workspace, "tail": tail})]
