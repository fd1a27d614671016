"""Array segments (chains of element runs): all of their SQL."""

from __future__ import annotations

from sqlalchemy import bindparam, delete, literal, select
from sqlalchemy.ext.asyncio import AsyncConnection

from .raw import prebuilt
from .tables import Segment

segments = Segment.__table__

_INSERT = prebuilt(
    segments.insert()
    .values(workspace=bindparam("p_ws"), prev=bindparam("p_prev"), data=bindparam("p_data"))
    .returning(segments.c.id)
)
_ONE = prebuilt(
    select(segments.c.prev, segments.c.data).where(
        segments.c.workspace == bindparam("p_ws"), segments.c.id == bindparam("p_id")
    )
)


def _chain_statement():
    start = (
        select(segments.c.id, segments.c.prev, segments.c.data, literal(0).label("depth"))
        .where(segments.c.workspace == bindparam("p_ws"), segments.c.id == bindparam("p_tail"))
        .cte("chain", recursive=True)
    )
    step = select(segments.c.id, segments.c.prev, segments.c.data, (start.c.depth + 1).label("depth")).where(
        segments.c.workspace == bindparam("p_ws"), segments.c.id == start.c.prev
    )
    chain = start.union_all(step)
    return prebuilt(select(chain.c.data).order_by(chain.c.depth.desc()))


_CHAIN = _chain_statement()


async def add(conn: AsyncConnection, workspace: str, prev: int | None, data: bytes) -> int:
    """Store one segment after `prev` (None starts a chain); returns its id."""
    return int((await conn.execute(_INSERT, {"p_ws": workspace, "p_prev": prev, "p_data": data})).scalar_one())


async def get(conn: AsyncConnection, workspace: str, segment_id: int) -> tuple[int | None, bytes]:
    """(prev, data) of one segment."""
    row = (await conn.execute(_ONE, {"p_ws": workspace, "p_id": segment_id})).one()
    return row.prev, bytes(row.data)


async def chain(conn: AsyncConnection, workspace: str, tail: int) -> list[bytes]:
    """The data of every segment from the start of the chain to `tail`, oldest first (one query)."""
    return [bytes(d) for (d,) in await conn.execute(_CHAIN, {"p_ws": workspace, "p_tail": tail})]


async def links(conn: AsyncConnection, workspace: str) -> dict[int, int | None]:
    """id -> prev for every segment of a workspace (what prune walks)."""
    stmt = select(segments.c.id, segments.c.prev).where(segments.c.workspace == workspace)
    return {i: p for i, p in await conn.execute(stmt)}


async def delete_ids(conn: AsyncConnection, workspace: str, ids: list[int]) -> None:
    for start in range(0, len(ids), 500):
        part = ids[start : start + 500]
        await conn.execute(delete(segments).where(segments.c.workspace == workspace, segments.c.id.in_(part)))
