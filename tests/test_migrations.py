"""Frozen migrations: the database the migrations build is the schema `store/tables.py` declares, an
existing database of an older layout is upgraded in place with its data, a newer one is refused."""

from __future__ import annotations

import logging
import os
import secrets
import sqlite3
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import asyncpg
import pytest
from conftest import PG_ENV, settings_for
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import create_async_engine

from mcp_harness.errors import Unavailable
from mcp_harness.service import Harness, Identity
from mcp_harness.store import Database
from mcp_harness.store.migrations import SCHEMA_VERSION
from mcp_harness.store.tables import metadata

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _pg_driver_url(url: str) -> str:
    return url.replace("postgresql+asyncpg://", "postgresql://", 1)


@pytest.fixture(params=["sqlite", "postgresql"])
def server(request: pytest.FixtureRequest) -> str | None:
    """None for SQLite; for PostgreSQL the server of MCP_HARNESS_TEST_POSTGRES_URL (skipped without it)."""
    if request.param == "sqlite":
        return None
    request.getfixturevalue("postgres_url")  # skips with the reason when no server is configured
    return _pg_driver_url(os.environ[PG_ENV]).rsplit("/", 1)[0]


@pytest.fixture
async def new_database(server: str | None, tmp_path: Path) -> AsyncIterator[Callable[[], Awaitable[str]]]:
    """Makes brand-new, empty databases of one backend; each call returns the URL of a new one
    (PostgreSQL: dropped at the end)."""
    made: list[str] = []

    async def make() -> str:
        name = f"mcp_harness_migr_{secrets.token_hex(4)}"
        if server is None:
            return f"sqlite+aiosqlite:///{tmp_path / (name + '.db')}"
        admin = await asyncpg.connect(server + "/postgres")
        try:
            await admin.execute(f'CREATE DATABASE "{name}"')
        finally:
            await admin.close()
        made.append(name)
        return f"postgresql+asyncpg://{server.split('://', 1)[1]}/{name}"

    yield make
    if made:
        admin = await asyncpg.connect(server + "/postgres")
        try:
            for name in made:
                await admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        finally:
            await admin.close()


def _index_shape(conn: Connection, index: dict[str, Any]) -> tuple:
    options = {k: str(v) for k, v in index.get("dialect_options", {}).items()}  # partial-index predicates
    if conn.dialect.name == "sqlite":  # SQLAlchemy reflects no sort order on SQLite: ask SQLite
        rows = conn.exec_driver_sql(f'PRAGMA index_xinfo("{index["name"]}")').fetchall()
        sorting = tuple((row[2], "desc" if row[3] else "asc") for row in rows if row[5])
    else:
        sorting = tuple(sorted((k, tuple(v)) for k, v in index.get("column_sorting", {}).items()))
    return (
        tuple(index["column_names"]),
        tuple(str(e) for e in index.get("expressions") or ()),
        bool(index["unique"]),
        tuple(sorted(options.items())),
        sorting,
    )


def describe(conn: Connection) -> dict[str, Any]:
    """Everything about a database's schema that the code relies on, as plain comparable values."""
    insp = inspect(conn)
    schema: dict[str, Any] = {}
    for table in sorted(insp.get_table_names()):
        schema[table] = {
            "columns": {
                c["name"]: {"type": str(c["type"]), "nullable": c["nullable"], "default": c["default"]}
                for c in insp.get_columns(table)
            },
            "primary key": insp.get_pk_constraint(table)["constrained_columns"],
            "unique": sorted((u["name"] or "", tuple(u["column_names"])) for u in insp.get_unique_constraints(table)),
            "indexes": {i["name"]: _index_shape(conn, i) for i in insp.get_indexes(table)},
        }
    return schema


async def schema_of(url: str, build: Callable[[Connection], None] | None = None) -> dict[str, Any]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            if build is not None:
                await conn.run_sync(build)
            return await conn.run_sync(describe)
    finally:
        await engine.dispose()


def differences(built: dict[str, Any], declared: dict[str, Any]) -> list[str]:
    """Readable differences between two `describe()` results (empty when they agree)."""
    out = [f"table {t}: only in the migrated database" for t in built.keys() - declared.keys()]
    out += [f"table {t}: declared in tables.py, no migration creates it" for t in declared.keys() - built.keys()]
    for table in sorted(built.keys() & declared.keys()):
        for part in ("columns", "indexes"):
            have, want = built[table][part], declared[table][part]
            for name in sorted(have.keys() | want.keys()):
                if have.get(name) != want.get(name):
                    out.append(f"{table} {part[:-1] if part == 'columns' else 'index'} {name}: "
                               f"migrations give {have.get(name)}, tables.py declares {want.get(name)}")  # fmt: skip
        for part in ("primary key", "unique"):
            if built[table][part] != declared[table][part]:
                out.append(f"{table} {part}: migrations give {built[table][part]}, "
                           f"tables.py declares {declared[table][part]}")  # fmt: skip
    return out


async def declared_schema(new_database: Callable[[], Awaitable[str]]) -> dict[str, Any]:
    """The schema `store/tables.py` declares, as this backend creates it."""
    return await schema_of(await new_database(), metadata.create_all)


async def migrated(new_database: Callable[[], Awaitable[str]]) -> str:
    """A new database brought up to date by the migrations (opening it runs them)."""
    url = await new_database()
    db = Database(url)
    try:
        await db.open()
    finally:
        await db.close()
    return url


async def test_migrations_build_the_schema_the_tables_declare(new_database):
    url = await migrated(new_database)
    declared = await declared_schema(new_database)
    assert declared["checkpoints"]["indexes"]["ix_checkpoint_label"][3], "partial-index predicates are compared"
    assert differences(await schema_of(url), declared) == []


async def test_the_comparison_sees_a_column_without_a_migration(new_database):
    """The check above can fail: a declared column, or an index, that no migration makes is reported."""
    url = await migrated(new_database)
    declared = await declared_schema(new_database)
    declared["tasks"]["columns"]["extra"] = {"type": "TEXT", "nullable": True, "default": None}
    declared["checkpoints"]["indexes"]["ix_checkpoint_label"] = ("changed",)
    found = differences(await schema_of(url), declared)
    assert len(found) == 2, found
    assert found[0].startswith("checkpoints index ix_checkpoint_label: migrations give (('workspace'"), found
    assert found[1].startswith("tasks column extra: migrations give None, tables.py declares {'type': 'TEXT'"), found


async def load_dump(url: str, dialect: str) -> None:
    """Restore the checked-in dump of a schema-version-2 database (written by commit d62fc4d)."""
    script = (FIXTURES / f"schema_v2.{dialect}.sql").read_text()
    if dialect == "sqlite":
        with sqlite3.connect(url.split("///", 1)[1]) as raw:
            raw.executescript(script)
        return
    conn = await asyncpg.connect(_pg_driver_url(url))
    try:
        await conn.execute(script)  # no arguments: the simple protocol runs the whole script
    finally:
        await conn.close()


async def all_rows(url: str) -> dict[str, list[tuple]]:
    """Every row of every table, in a stable order, values as Python sees them."""
    engine = create_async_engine(url)
    try:
        async with engine.connect() as conn:
            names = await conn.run_sync(lambda sync: inspect(sync).get_table_names())
            out = {}
            for name in sorted(names):
                rows = (await conn.execute(text(f'SELECT * FROM "{name}"'))).all()  # noqa: S608 - our names
                out[name] = sorted((tuple(r) for r in rows), key=repr)
            return out
    finally:
        await engine.dispose()


def message(n: int) -> dict:
    """As tests/fixtures/make_v2_dumps.py wrote them."""
    return {"role": "user" if n % 2 else "assistant", "text": f"message {n} " + "x" * 300}


async def test_a_version_2_database_is_upgraded_in_place(new_database):
    url = await new_database()
    dialect = "sqlite" if url.startswith("sqlite") else "postgresql"
    await load_dump(url, dialect)
    before = await all_rows(url)
    assert ("schema_version", "2") in before["harness_meta"] and len(before["segments"]) == 2

    ident = Identity("legacy", "coder")
    async with Harness.open(settings_for(url)) as h:  # reads only: the upgrade alone changes the rows
        brief = await h.restore(ident)
        assert brief.state == {"goal": "ship", "notes": ["a", "b"], "big": "x" * 500}
        assert (await h.restore(ident, label="start")).state == {"goal": "ship", "notes": ["a"]}
        assert (await h.restore(ident, thread="chat")).state == {"messages": [message(n) for n in range(14)]}
        assert (await h.restore(ident, thread="feat/x", label="fork")).state == {"other": True}
        listing = await h.tasks.list(ident, status=["done", "pending", "claimed"])  # every status here
        assert [(t.key, t.status) for t in listing.tasks] == [("t1", "done"), ("t2", "pending"), ("t3", "claimed")]
        assert [e.summary for e in brief.recent_progress] == ["a note", "did things"]  # every thread's
    after = await all_rows(url)
    meta = {row[0]: row[1] for row in after.pop("harness_meta")}
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    # every row kept; migration 4 added the (empty) task events table, migration 5 three task columns
    # (review false, kind work, no review comment), migration 6 the task counters, filled from the tasks
    # there (one of each status)
    counters = sorted((ws, status, bool(blocked), n) for _id, ws, status, blocked, n in after.pop("task_counts"))
    assert counters == [("legacy", "claimed", False, 1), ("legacy", "done", False, 1), ("legacy", "pending", False, 1)]
    kept = {name: rows for name, rows in before.items() if name != "harness_meta"}
    kept["tasks"] = [(*row, False, "work", None) for row in kept["tasks"]]
    assert after == {**kept, "task_events": []}
    counts = listing.counts.model_dump()
    assert counts == {**dict.fromkeys(counts, 0), "pending": 1, "claimed": 1, "done": 1}
    assert differences(await schema_of(url), await declared_schema(new_database)) == []

    async with Harness.open(settings_for(url)) as h:  # and it keeps working: a list grows, ids continue
        messages = [message(n) for n in range(16)]
        await h.checkpoints.save(ident, thread="chat", state={"messages": messages})
        assert (await h.restore(ident, thread="chat")).state == {"messages": messages}
        entry = await h.progress.record(ident, summary="after the upgrade")
        assert entry.seq == 3
        assert (await h.restore(ident, progress_limit=1)).recent_progress[0].summary == "after the upgrade"
        await h.tasks.add(ident, tasks=[{"key": "t4", "title": "after the upgrade"}])  # the triggers count it
        counts = (await h.tasks.list(ident)).counts
        assert counts.model_dump() == {**dict.fromkeys(counts.model_dump(), 0), "pending": 2, "claimed": 1, "done": 1}


async def test_a_database_from_a_newer_version_is_refused(new_database):
    url = await new_database()
    async with Harness.open(settings_for(url)):
        pass
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(text("UPDATE harness_meta SET value = :v WHERE \"key\" = 'schema_version'"),
                               {"v": str(SCHEMA_VERSION + 1)})  # fmt: skip
    finally:
        await engine.dispose()
    with pytest.raises(Unavailable, match="written by a newer mcp-harness"):
        async with Harness.open(settings_for(url)):
            pass


async def test_servers_starting_together_migrate_once(new_database, caplog):
    """Several servers' Database.open() at once on a new database: exactly one migrates (the runner
    logs each time it does), the others wait for its lock and find the schema done, none fails."""
    url = await new_database()
    caplog.set_level(logging.INFO, logger="mcp_harness.store.migrations")
    errors = []

    async def start() -> None:
        db = Database(url)
        try:
            await db.open()
        except Exception as exc:  # noqa: BLE001 - collected and asserted
            errors.append(exc)
        finally:
            await db.close()

    async with anyio.create_task_group() as tg:
        for _ in range(6):
            tg.start_soon(start)
    assert errors == []
    migrated = [r.getMessage() for r in caplog.records if r.name == "mcp_harness.store.migrations"]
    assert migrated == [f"database schema migrated from version 0 to {SCHEMA_VERSION}"]
