"""Frozen migrations: the database the migrations build is the schema `store/tables.py` declares
(columns, keys, indexes, triggers and functions), a released migration's files never change, an
existing database of an older layout is upgraded in place with its data, a newer one is refused."""

from __future__ import annotations

import hashlib
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
from sqlalchemy import Connection, inspect, text
from sqlalchemy.ext.asyncio import create_async_engine
from support import PG_ENV, settings_for

from mcp_harness.arguments import AddTasksArgs, ListTasksArgs, RecordProgressArgs, RestoreStateArgs, SaveCheckpointArgs
from mcp_harness.errors import Unavailable
from mcp_harness.service import Harness, Identity
from mcp_harness.store import Database
from mcp_harness.store.migrations import MIGRATIONS, MIGRATIONS_DIR, SCHEMA_VERSION, MigrationFileError, load
from mcp_harness.store.tables import metadata

pytestmark = pytest.mark.anyio

FIXTURES = Path(__file__).resolve().parent / "fixtures"

#: SHA-256 of every file of a released migration. A released migration is never edited (a database
#: is what its migrations made it); when a release ships a new one, pin its two files here.
RELEASED = {
    "0001_initial.postgresql.sql": "fee90c9496f34568197dcc6f1e9c902a0df7dad834d413fbdeb1769cdbde62a1",
    "0001_initial.sqlite.sql": "aed209023b7fbb8fe0b032bbc41557ddc6b98447742f2349ef95bcdabb997a06",
    "0002_segments.postgresql.sql": "e2db44a900f0e3b3ce5a0ba0ce44d38e0b01c0c9f4dfcb0ee6cf9d15f19dd7be",
    "0002_segments.sqlite.sql": "2cc182d151fcf96447e5d95507402676b6bad4fff2d079a6d58d3aef4d012684",
    "0003_bigint_versions.postgresql.sql": "691ddadf682594505c7ad66ce160a2f0efe296f12c8ca5f87617a1d94f47e705",
    "0003_bigint_versions.sqlite.sql": "a2293806e817d09ccc477a4b18a566ef9221c6f6329c610ee2bc60829da96e1e",
    "0004_task_events.postgresql.sql": "3d9a9f7852cedeb5296ed9ca149b53ad9a7598a5180ea374118741d144fd1be8",
    "0004_task_events.sqlite.sql": "aa0a431a899507369e05e49c83d51dbc05ed4d6535b04f46b562fdb38c653aff",
    "0005_review.postgresql.sql": "721f58ea40c35392264bb01597be6d73b5647dbf590665ee9e4f00a6f7a8b752",
    "0005_review.sqlite.sql": "721f58ea40c35392264bb01597be6d73b5647dbf590665ee9e4f00a6f7a8b752",
    "0006_task_counts.postgresql.sql": "d2aae93523004a93cd33a185babdca99a2ae6c1bd626d9559c8ce10361b9a41e",
    "0006_task_counts.sqlite.sql": "1852f9f098369c65365998db6b7e56a9a9c85f6a6d3d6b8c43109569e1ba0ba3",
    "0007_task_workspaces.postgresql.sql": "53f2a85701c5bb2b2d46c7b401232e25b898fe25511252000af9527765c6ad6c",
    "0007_task_workspaces.sqlite.sql": "53f2a85701c5bb2b2d46c7b401232e25b898fe25511252000af9527765c6ad6c",
}


def test_released_migrations_are_never_edited():
    current = {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in MIGRATIONS_DIR.glob("*.sql")}
    changed = sorted(name for name, digest in RELEASED.items() if current.get(name) != digest)
    assert changed == [], f"released migration files changed or missing: {changed} (add a new migration instead)"
    assert {m.version for m in MIGRATIONS} >= {int(name[:4]) for name in RELEASED}


@pytest.mark.parametrize(
    ("files", "error"),
    [
        ({"0001_a.sqlite.sql": "SELECT 1\n/\n"}, "migration 1 has no postgresql file"),
        ({"0001_a.sqlite.sql": "-- a\n", "0001_b.postgresql.sql": "-- b\n"}, "two names"),
        ({"0002_a.sqlite.sql": "-- a\n", "0002_a.postgresql.sql": "-- a\n"}, "from 1 without gaps"),
        ({"0001_a.sqlite.sql": "SELECT 1\n/\nSELECT 2\n", "0001_a.postgresql.sql": "-- a\n"}, "not ended"),
        ({"1_a.sql": ""}, "not a migration file's name"),
    ],
)
def test_the_migration_files_are_checked_when_loaded(tmp_path, files, error):
    for name, sql in files.items():
        (tmp_path / name).write_text(sql)
    with pytest.raises(MigrationFileError, match=error):
        load(tmp_path)


def test_a_migration_file_is_statements_each_ended_by_a_slash_line(tmp_path):
    (tmp_path / "0001_a.sqlite.sql").write_text(
        "-- 1: what it does\nCREATE TABLE t (a INT)\n/\n-- more\nCREATE INDEX i ON t (a)\n/\n"
    )
    (tmp_path / "0001_a.postgresql.sql").write_text("-- 1: what it does\n-- nothing here\n")
    [migration] = load(tmp_path)
    assert migration.what == "what it does"
    assert migration.statements("sqlite") == [
        "-- 1: what it does\nCREATE TABLE t (a INT)",
        "-- more\nCREATE INDEX i ON t (a)",
    ]
    assert migration.statements("postgresql") == []


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
            "triggers": _triggers(conn, table),
        }
    schema["(functions)"] = _functions(conn)
    schema["(views)"] = _views(conn)
    return schema


def _normal(sql: str) -> str:
    return " ".join(sql.split())


def _triggers(conn: Connection, table: str) -> dict[str, str]:
    """Trigger name -> its definition as the database reports it (whitespace normalised)."""
    if conn.dialect.name == "sqlite":
        rows = conn.execute(
            text("SELECT name, sql FROM sqlite_master WHERE type = 'trigger' AND tbl_name = :t"), {"t": table}
        )
    else:
        sql = (
            "SELECT t.tgname, pg_get_triggerdef(t.oid) FROM pg_trigger AS t JOIN pg_class AS c "
            "ON c.oid = t.tgrelid WHERE NOT t.tgisinternal AND c.relname = :t"
        )
        rows = conn.execute(text(sql), {"t": table})
    return {name: _normal(sql) for name, sql in rows}


def _functions(conn: Connection) -> dict[str, str]:
    """Function name -> its definition (PostgreSQL; SQLite has none)."""
    if conn.dialect.name == "sqlite":
        return {}
    rows = conn.execute(
        text(
            "SELECT p.proname, pg_get_functiondef(p.oid) FROM pg_proc AS p JOIN pg_namespace AS n "
            "ON n.oid = p.pronamespace WHERE n.nspname = current_schema()"
        )
    )
    return {name: _normal(sql) for name, sql in rows}


def _views(conn: Connection) -> dict[str, str]:
    """View name -> its definition as the database reports it (whitespace normalised)."""
    if conn.dialect.name == "sqlite":
        rows = conn.execute(text("SELECT name, sql FROM sqlite_master WHERE type = 'view'"))
    else:
        rows = conn.execute(text("SELECT viewname, definition FROM pg_views WHERE schemaname = current_schema()"))
    return {name: _normal(sql) for name, sql in rows}


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
    functions = built.get("(functions)", {}), declared.get("(functions)", {})
    out = [
        f"function {name}: migrations give {functions[0].get(name)}, tables.py declares {functions[1].get(name)}"
        for name in sorted(functions[0].keys() | functions[1].keys())
        if functions[0].get(name) != functions[1].get(name)
    ]
    views = built.get("(views)", {}), declared.get("(views)", {})
    out += [
        f"view {name}: migrations give {views[0].get(name)}, tables.py declares {views[1].get(name)}"
        for name in sorted(views[0].keys() | views[1].keys())
        if views[0].get(name) != views[1].get(name)
    ]
    built, declared = ({k: v for k, v in d.items() if k not in ("(functions)", "(views)")} for d in (built, declared))
    out += [f"table {t}: only in the migrated database" for t in built.keys() - declared.keys()]
    out += [f"table {t}: declared in tables.py, no migration creates it" for t in declared.keys() - built.keys()]
    for table in sorted(built.keys() & declared.keys()):
        for part in ("columns", "indexes", "triggers"):
            have, want = built[table][part], declared[table][part]
            for name in sorted(have.keys() | want.keys()):
                if have.get(name) != want.get(name):
                    out.append(
                        f"{table} {part[:-1] if part != 'indexes' else 'index'} {name}: "
                        f"migrations give {have.get(name)}, tables.py declares {want.get(name)}"
                    )
        for part in ("primary key", "unique"):
            if built[table][part] != declared[table][part]:
                out.append(
                    f"{table} {part}: migrations give {built[table][part]}, tables.py declares {declared[table][part]}"
                )
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
    assert declared["tasks"]["triggers"], "triggers are compared"
    assert declared["(functions)"] or url.startswith("sqlite"), "functions are compared"
    assert declared["(views)"]["live_messages"], "views are compared"
    assert differences(await schema_of(url), declared) == []


async def test_the_comparison_sees_a_column_without_a_migration(new_database):
    """The check above can fail: a declared column, index, trigger or function that no migration makes
    (or makes otherwise) is reported."""
    url = await migrated(new_database)
    declared = await declared_schema(new_database)
    declared["tasks"]["columns"]["extra"] = {"type": "TEXT", "nullable": True, "default": None}
    declared["checkpoints"]["indexes"]["ix_checkpoint_label"] = ("changed",)
    declared["tasks"]["triggers"]["task_counts_update"] += " -- changed"
    found = differences(await schema_of(url), declared)
    assert len(found) == 3, found
    assert found[0].startswith("checkpoints index ix_checkpoint_label: migrations give (('workspace'"), found
    assert found[1].startswith("tasks column extra: migrations give None, tables.py declares {'type': 'TEXT'"), found
    assert found[2].startswith("tasks trigger task_counts_update: migrations give CREATE TRIGGER"), found
    if not url.startswith("sqlite"):
        declared["(functions)"].pop("mcp_harness_count_tasks")
        assert differences(await schema_of(url), declared)[0].startswith(
            "function mcp_harness_count_tasks: migrations give"
        )


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
        brief = await h.restore(ident, RestoreStateArgs())
        assert brief.state == {"goal": "ship", "notes": ["a", "b"], "big": "x" * 500}
        assert (await h.restore(ident, RestoreStateArgs(label="start"))).state == {"goal": "ship", "notes": ["a"]}
        assert (await h.restore(ident, RestoreStateArgs(thread="chat"))).state == {
            "messages": [message(n) for n in range(14)]
        }
        assert (await h.restore(ident, RestoreStateArgs(thread="feat/x", label="fork"))).state == {"other": True}
        listing = await h.tasks.list(ident, ListTasksArgs(status=["done", "pending", "claimed"]))  # every status here
        assert [(t.key, t.status) for t in listing.tasks] == [("t1", "done"), ("t2", "pending"), ("t3", "claimed")]
        assert [e.summary for e in brief.recent_progress] == ["a note", "did things"]  # every thread's
        # migration 10 built the search index over the rows already there
        assert [e.summary for e in (await h.restore(ident, RestoreStateArgs(query="things"))).recent_progress] == [
            "did things"
        ]
    after = await all_rows(url)
    meta = {row[0]: row[1] for row in after.pop("harness_meta")}
    assert meta["schema_version"] == str(SCHEMA_VERSION)
    # every row kept; migration 4 added the (empty) task events table, migration 5 three task columns
    # (review false, kind work, no review comment), migration 6 the task counters, filled from the tasks
    # there (one of each status)
    counters = sorted((ws, status, bool(blocked), n) for _id, ws, status, blocked, n in after.pop("task_counts"))
    assert counters == [("legacy", "claimed", False, 1), ("legacy", "done", False, 1), ("legacy", "pending", False, 1)]
    kept = {name: rows for name, rows in before.items() if name != "harness_meta"}
    # migration 11: paths; 17: added_by; 18: the lease's process; 20: stale (false)
    kept["tasks"] = [(*row, False, "work", None, None, None, None, False) for row in kept["tasks"]]
    search = {name: after.pop(name) for name in list(after) if "_fts" in name}  # migration 10 (SQLite)
    assert sorted(search.get("progress_fts", [("a note", None), ("did things", None)])) == [
        ("a note", None),
        ("did things", None),
    ]
    # migration 8: console sessions; 9: messages; 11: path reservations; 12: agent contacts; 17: the runner's
    assert after == {
        **kept,
        "task_events": [],
        "console_sessions": [],
        "messages": [],
        "message_acks": [],
        "task_reservations": [],
        "agent_contacts": [],
        "runners": [],
        "agent_sessions": [],
    }
    counts = listing.counts.model_dump()
    assert counts == {**dict.fromkeys(counts, 0), "pending": 1, "claimed": 1, "done": 1}
    assert differences(await schema_of(url), await declared_schema(new_database)) == []

    async with Harness.open(settings_for(url)) as h:  # and it keeps working: a list grows, ids continue
        messages = [message(n) for n in range(16)]
        await h.checkpoints.save(ident, SaveCheckpointArgs(thread="chat", state={"messages": messages}))
        assert (await h.restore(ident, RestoreStateArgs(thread="chat"))).state == {"messages": messages}
        entry = await h.progress.record(ident, RecordProgressArgs(summary="after the upgrade"))
        assert entry.seq == 3
        assert (await h.restore(ident, RestoreStateArgs(progress_limit=1))).recent_progress[
            0
        ].summary == "after the upgrade"
        await h.tasks.add(
            ident, AddTasksArgs(tasks=[{"key": "t4", "title": "after the upgrade"}])
        )  # the triggers count it
        counts = (await h.tasks.list(ident, ListTasksArgs())).counts
        assert counts.model_dump() == {**dict.fromkeys(counts.model_dump(), 0), "pending": 2, "claimed": 1, "done": 1}


async def test_a_database_from_a_newer_version_is_refused(new_database):
    url = await new_database()
    async with Harness.open(settings_for(url)):
        pass
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            await conn.execute(
                text("UPDATE harness_meta SET value = :v WHERE \"key\" = 'schema_version'"),
                {"v": str(SCHEMA_VERSION + 1)},
            )
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
