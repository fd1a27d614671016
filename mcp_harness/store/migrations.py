"""Numbered schema migrations, applied on start inside one write transaction.

SQLite: the transaction opens with BEGIN IMMEDIATE, so a second server starting at the same moment
waits for the first. PostgreSQL: a transaction-scoped advisory lock does the same. A database whose
schema is newer than this code is refused: an old server must not write a layout it does not know.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable

from sqlalchemy import select, text
from sqlalchemy.ext.asyncio import AsyncConnection

from ..errors import Unavailable
from .tables import Checkpoint, Meta, Segment, metadata

#: any fixed 64-bit number; it names the lock every mcp-harness server takes while migrating
ADVISORY_LOCK_ID = 0x6D63_7068_6172_6E73


async def _m1_initial(conn: AsyncConnection) -> None:
    await conn.run_sync(metadata.create_all)


async def _m2_segments(conn: AsyncConnection) -> None:
    """Array segments (long lists stored as append chains), and a label index that holds only the
    checkpoints that have a label. On a database created by this version's `_m1_initial` both exist
    already; rebuilding the (empty) index then costs nothing."""
    await conn.run_sync(lambda sync: Segment.__table__.create(sync, checkfirst=True))
    await conn.execute(text("DROP INDEX IF EXISTS ix_checkpoint_label"))
    label_index = next(i for i in Checkpoint.__table__.indexes if i.name == "ix_checkpoint_label")
    await conn.run_sync(lambda sync: label_index.create(sync))


#: the literal DDL of migration 3, per dialect (IF NOT EXISTS: migration 1 here still creates every
#: declared table; frozen migrations, branch i15-migr, make that literal too)
_M3_TASK_EVENTS = """
CREATE TABLE IF NOT EXISTS task_events (
    id {id} NOT NULL,
    workspace VARCHAR NOT NULL,
    task_key VARCHAR NOT NULL,
    kind VARCHAR NOT NULL,
    actor VARCHAR NOT NULL,
    attempt INTEGER NOT NULL,
    detail TEXT,
    created_at FLOAT NOT NULL,
    PRIMARY KEY (id)
);
CREATE INDEX IF NOT EXISTS ix_task_event_task ON task_events (workspace, task_key, id);
"""


async def _m3_task_events(conn: AsyncConnection) -> None:
    """Task events: every transition of a task, with its actor and time."""
    id_type = "INTEGER" if conn.dialect.name == "sqlite" else "BIGSERIAL"
    for statement in _M3_TASK_EVENTS.format(id=id_type).split(";"):
        if statement.strip():
            await conn.execute(text(statement))


#: (version, what it does, function). Append only; never edit a released migration.
MIGRATIONS: list[tuple[int, str, Callable[[AsyncConnection], Awaitable[None]]]] = [
    (1, "initial schema", _m1_initial),
    (2, "array segments; partial label index", _m2_segments),
    (3, "task events", _m3_task_events),
]
SCHEMA_VERSION = MIGRATIONS[-1][0]

meta = Meta.__table__


async def current_version(conn: AsyncConnection) -> int:
    """The schema version recorded in the database, 0 for an empty database."""
    exists = await conn.run_sync(lambda sync: sync.dialect.has_table(sync, "harness_meta"))
    if not exists:
        return 0
    row = (await conn.execute(select(meta.c.value).where(meta.c.key == "schema_version"))).first()
    return int(row[0]) if row else 0


async def migrate(conn: AsyncConnection, dialect: str) -> int:
    """Bring the schema up to `SCHEMA_VERSION`; returns the version found before."""
    if dialect == "postgresql":
        await conn.execute(text("SELECT pg_advisory_xact_lock(:id)"), {"id": ADVISORY_LOCK_ID})
    found = await current_version(conn)
    if found > SCHEMA_VERSION:
        raise Unavailable(
            f"this database was written by a newer mcp-harness (schema version {found}; this version "
            f"understands up to {SCHEMA_VERSION}): upgrade mcp-harness to use it"
        )
    for version, _what, fn in MIGRATIONS:
        if version > found:
            await fn(conn)
    if found < SCHEMA_VERSION:
        await conn.execute(meta.delete().where(meta.c.key == "schema_version"))
        await conn.execute(meta.insert().values(key="schema_version", value=str(SCHEMA_VERSION)))
        await conn.execute(meta.delete().where(meta.c.key == "migrated_at"))
        await conn.execute(meta.insert().values(key="migrated_at", value=repr(time.time())))
    return found
