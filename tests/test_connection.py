"""The store's one small interface: literal SQL run on sqlite3 or asyncpg, typed rows equal to what
SQLAlchemy reads of the same data, transactions that commit or leave nothing, and database errors
that leave the store as the store's own types. On SQLite and PostgreSQL."""

from __future__ import annotations

import dataclasses
import gc
import sys
import threading
from typing import NamedTuple

import pytest
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError
from support import settings_for

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.maintenance.store.backup import tasks, workspaces
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store import StorageError, UniqueViolation, common, idempotency
from mcp_harness.store.common import ensure_workspace, next_progress_seq
from mcp_harness.store.connection import GETTERS, Query, _getters, fetch_row, numbered
from mcp_harness.tasks.store import queries
from mcp_harness.tasks.store import tasks as task_store

pytestmark = pytest.mark.anyio


async def test_records_equal_what_sqlalchemy_reads(db_url, workspace):
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(
            Identity(workspace, "a"), AddTasksArgs(tasks=[TaskSpec(key="a", title="A"), TaskSpec(key="b", title="B")])
        )
        async with h.db.read() as conn:
            fast = await task_store.page(conn, workspace, statuses=None, tag=None, limit=10, after_id=0)
        async with h.db.cold_read() as conn:
            stmt = select(tasks).where(tasks.c.workspace == workspace).order_by(tasks.c.id)
            slow = [dict(r) for r in (await conn.execute(stmt)).mappings()]
    # columns a task record leaves out on purpose: read on their own where they are needed
    apart = {"added_by", "lease_process", "stale"}
    assert set(slow[0]) - set(fast[0]._asdict()) == apart
    slow = [{k: v for k, v in row.items() if k not in apart} for row in slow]
    assert [r._asdict() for r in fast] == slow and len(fast) == 2
    assert fast[0].ready is True and fast[0].blocked is False  # booleans, not SQLite's 0/1
    assert [type(v) for v in fast[0]] == [type(v) for v in slow[0].values()]


async def test_a_new_workspace_row_has_every_column(db_url, workspace):
    """Literal SQL writes what SQLModel's Python-side defaults used to fill in (progress_seq 0)."""
    async with Harness.open(settings_for(db_url)) as h:
        async with h.db.write() as conn:
            await ensure_workspace(conn, workspace)
        async with h.db.cold_read() as conn:
            stmt = select(workspaces.c.progress_seq).where(workspaces.c.name == workspace)
            assert (await conn.execute(stmt)).scalar_one() == 0
        async with h.db.write() as conn:
            assert await next_progress_seq(conn, workspace) == 1


async def test_a_lost_race_on_a_unique_key_is_a_store_error_and_leaves_nothing(db_url, workspace):
    async with Harness.open(settings_for(db_url)) as h:
        async with h.db.write() as conn:
            await idempotency.put(conn, workspace, "a", "tool", "k1", "h", "{}", 1.0)
        with pytest.raises(UniqueViolation) as raised:
            async with h.db.write() as conn:
                await idempotency.put(conn, workspace, "a", "tool", "k2", "h", "{}", 1.0)
                await idempotency.put(conn, workspace, "a", "tool", "k1", "h", "{}", 1.0)
        assert not isinstance(raised.value, SQLAlchemyError) and type(raised.value).__module__.startswith("mcp_harness")
        async with h.db.read() as conn:  # the failed transaction left nothing behind
            assert await idempotency.get(conn, workspace, "a", "tool", "k1") is not None
            assert await idempotency.get(conn, workspace, "a", "tool", "k2") is None


async def test_single_statements_honour_the_prepared_statement_cache_setting(db_url, workspace):
    """`?prepared_statement_cache_size=0` (for PgBouncer in transaction mode) reaches the asyncpg pool;
    claims and completes (the single-statement path) work with it."""
    if not db_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL URL setting")
    url = db_url + ("&" if "?" in db_url else "?") + "prepared_statement_cache_size=0"
    ident = Identity(workspace, "a")
    async with Harness.open(settings_for(url)) as h:
        await h.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(key="a", title="A")]))
        got = await h.tasks.claim(ident, ClaimTaskArgs())
        done = await h.tasks.update(
            ident, UpdateTaskArgs(task_key="a", action="complete", lease_token=got.lease.token, verification="checked")
        )
        assert done.status == "done"
        assert h.db._pool._connect_kwargs["statement_cache_size"] == 0


@pytest.mark.parametrize("through", ["write", "cold_write"])
async def test_a_failed_write_leaves_nothing_and_a_finished_one_commits(db_url, workspace, through):
    """Hot writes (literal SQL) and cold writes (SQLAlchemy) alike: an error rolls back everything,
    a success commits everything."""

    async def insert(conn, name: str) -> None:
        if through == "write":
            await conn.execute(common.Q.ensure_workspace, {"ws": name, "at": 1.0})
        else:
            await conn.execute(workspaces.insert().values(name=name, progress_seq=0, created_at=1.0))

    async with Harness.open(settings_for(db_url)) as h:
        begin = getattr(h.db, through)
        with pytest.raises(RuntimeError):
            async with begin() as conn:
                await insert(conn, workspace + "-gone")
                raise RuntimeError("the body failed")
        async with begin() as conn:
            await insert(conn, workspace + "-kept")
            await insert(conn, workspace + "-kept-too")
        async with h.db.cold_read() as conn:
            stmt = select(workspaces.c.name).where(workspaces.c.name.like(workspace + "%")).order_by(workspaces.c.name)
            assert (await conn.execute(stmt)).scalars().all() == [workspace + "-kept", workspace + "-kept-too"]


class Renamed(NamedTuple):
    title: str
    key: str


async def test_a_query_whose_columns_differ_from_its_record_is_refused(db_url, workspace):
    """Rows are matched to records by column name: a query selecting other names (or another order)
    fails loudly instead of filling fields by position."""
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(Identity(workspace, "a"), AddTasksArgs(tasks=[TaskSpec(key="a", title="A")]))
        swapped = Query('SELECT "key", title FROM tasks WHERE workspace = :ws', row=Renamed, name="swapped")
        with pytest.raises(StorageError, match="returns columns"):
            async with h.db.read() as conn:
                await conn.fetch_all(swapped, {"ws": workspace})
        unnamed = Query('SELECT "key", title, 1 + 1 FROM tasks WHERE workspace = :ws')
        async with h.db.read() as conn:
            row = await conn.fetch_one(unnamed, {"ws": workspace})
        assert (row.key, row.title, row.column2) == ("a", "A", 2)


async def test_a_row_a_query_must_return_is_a_store_error_when_missing(db_url, workspace):
    """`fetch_row` is `fetch_one` for a row that is always there: a missing one names the query."""
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(Identity(workspace, "a"), AddTasksArgs(tasks=[TaskSpec(key="a", title="A")]))
        by_key = Query('SELECT "key" FROM tasks WHERE workspace = :ws AND "key" = :key', name="by_key")
        async with h.db.read() as conn:
            assert (await fetch_row(conn, by_key, {"ws": workspace, "key": "a"})).key == "a"
            with pytest.raises(StorageError, match="query 'by_key' returned no row"):
                await fetch_row(conn, by_key, {"ws": workspace, "key": "b"})


def test_parameters_are_numbered_once_for_asyncpg():
    sql = "SELECT :a, :b, 'x:y', c::text FROM t WHERE d = :a AND e = ':b'"
    assert numbered(sql) == ("SELECT $1, $2, 'x:y', c::text FROM t WHERE d = $1 AND e = ':b'", ("a", "b"))
    claim = queries.claim(True, True)
    assert ":" not in claim.postgresql.replace("::", "") and "$" not in claim.sqlite
    assert set(claim.pg_names) == {"ws", "now", "agent", "token", "expires", "lease", "tags", "key", "fp", "process"}


async def test_one_pool_serves_every_path_on_postgresql(db_url, workspace):
    """One asyncpg pool per process: transactions, single statements and the cold paths (SQLAlchemy,
    which borrows the pool's connections and holds none of its own) never open more than the pool's
    size, however many run at once."""
    if not db_url.startswith("postgresql"):
        pytest.skip("PostgreSQL's connections")
    import anyio
    from sqlalchemy import text
    from sqlalchemy.pool import NullPool

    ident = Identity(workspace, "a")
    settings = dataclasses.replace(settings_for(db_url), pool_size=3)
    async with Harness.open(settings) as h:
        await h.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(key=f"t{i}", title="T") for i in range(6)]))
        seen: set[int] = set()

        async def cold() -> None:
            async with h.db.cold_read() as conn:
                seen.add((await conn.execute(text("SELECT pg_backend_pid()"))).scalar_one())
                await conn.execute(select(tasks.c.id).where(tasks.c.workspace == workspace))

        async def hot() -> None:
            async with h.db.read() as conn:
                seen.add(await conn.fetch_value(Query("SELECT pg_backend_pid()")))
            await h.tasks.claim(ident, ClaimTaskArgs())

        async with anyio.create_task_group() as tg:
            for _ in range(8):
                tg.start_soon(cold)
                tg.start_soon(hot)
        assert isinstance(h.db._cold.pool, NullPool)
        assert 1 <= len(seen) <= 3, seen
        others = Query(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )
        async with h.db.read() as conn:
            assert await conn.fetch_value(others) + 1 <= 3 + 1  # the pool, and the change feed's LISTEN if made


def test_named_queries_are_read_once_per_dialect_and_checked_at_load():
    from mcp_harness.store.named import QueryFileError, load, parse, sql_files

    assert {"tasks", "checkpoints", "messages", "console", "meta"} <= set(sql_files())
    for path in sql_files().values():  # every query file of the package loads
        assert list(load(path.stem)), path
    queries = parse(
        "-- what the file holds\n\n-- name: one\n-- row: TokenRow\n-- a description\nSELECT :a\n\n"
        "-- name: one [postgresql]\n-- row: TokenRow\nSELECT :a FOR UPDATE\n\n-- name: pg_only [postgresql]\nSHOW x\n",
        source="store/sql/t.sql",
    )
    assert (queries.one.sqlite, queries.one.postgresql, queries.one.name) == (
        "SELECT :a",
        "SELECT $1 FOR UPDATE",
        "t.one",
    )
    assert queries.one.row.__name__ == "TokenRow" and queries["pg_only"].postgresql == "SHOW x"
    assert queries.written_for("one") == ("sqlite", "postgresql") and queries.written_for("pg_only") == ("postgresql",)
    with pytest.raises(LookupError, match="store/sql/t.sql has no query named 'two'"):
        _ = queries.two
    bad = {
        "-- name: a\nSELECT 1\n-- name: a\nSELECT 2\n": "a second query named 'a'",
        "-- name: a [mysql]\nSELECT 1\n": "unknown dialect",
        "SELECT 1\n": "SQL before the first",
        "-- name: a\n-- row: Nothing\nSELECT 1\n": "unknown row type 'Nothing'",
        "-- name: a\n\n-- name: b\nSELECT 1\n": "query 'a' has no SQL",
        "-- name: a\nSELECT {columns} FROM tokens\n": "says {columns} but names no row type",
    }
    for text, error in bad.items():
        with pytest.raises(QueryFileError, match=error):
            parse(text, source="t.sql")


def test_columns_stands_for_the_row_types_fields_in_order():
    """A table's column list is written once, as its record: `{columns}` spells the row type's fields
    (`key` quoted), `{t.columns}` each with its table's alias, in every dialect's text."""
    from mcp_harness.store.named import parse
    from mcp_harness.store.records import TaskRecord

    text = "-- name: a\n-- row: TaskRecord\nSELECT {columns} FROM tasks\n\n-- name: b\n-- row: TaskRecord\n"
    text += "SELECT {t.columns} FROM tasks t WHERE t.id = :id\n"
    found = parse(text, source="t.sql")
    listed = ", ".join('"key"' if f == "key" else f for f in TaskRecord._fields)
    assert found.a.sqlite == found.a.postgresql == f"SELECT {listed} FROM tasks"
    assert found.b.sqlite.startswith('SELECT t.id, t.workspace, t."key", t.title') and "{" not in found.b.postgresql
    assert found.b.postgresql.endswith("FROM tasks t WHERE t.id = $1")


def test_a_comment_after_a_named_query_belongs_to_no_statement():
    """A heading between named queries (a comment after one statement's SQL) is not that statement's SQL:
    asyncpg's numbering would read a `:word` or an apostrophe in it."""
    from mcp_harness.store.named import parse

    text = "-- name: a\nSELECT :x\n\n-- The next ones: each task's events\n--\n\n-- name: b\n-- b's own\nSELECT 2\n"
    found = parse(text, source="t.sql")
    assert (found.a.sqlite, found.a.postgresql, found.b.sqlite) == ("SELECT :x", "SELECT $1", "SELECT 2")


def test_the_claim_condition_and_the_tag_subquery_are_written_once():
    """The claim's condition (`queries.CLAIMABLE`, the claim, what waiting claims poll, the ready listing)
    and the tag subquery (claims, empty claims, listings, the console's table) each have one text in the
    package's Python and SQL, which every statement that needs it is built from."""
    from pathlib import Path

    package = Path(queries.__file__).resolve().parent.parent
    files = [*package.rglob("*.py"), *package.rglob("*.sql")]
    sources = [p.read_text(encoding="utf-8") for p in files if "migrations" not in p.parts]  # history: frozen
    for fragment in ("attempts < max_attempts", "task_id FROM task_tags"):
        assert sum(text.count(fragment) for text in sources) == 1, fragment
    # a pick reads the condition's two parts by their indexes; a listing filters on the whole
    for picked in (queries.claim_event(True, True, "allowed"), queries.claim_probe(False, True)):
        assert queries._PENDING_DUE in picked.sqlite and queries._RAN_OUT in picked.sqlite
        assert "ready = TRUE" in picked.sqlite and queries.CLAIMABLE not in picked.sqlite
    assert queries.CLAIMABLE in queries.task_page(False, False, True).sqlite
    assert queries.CLAIMABLE in queries.claim(False, False).sqlite  # PostgreSQL's claim (its text before numbering)


def test_record_getters_are_made_whole_while_other_threads_collect_garbage():
    """A record type declared on one thread (the service is imported on a worker thread) while the
    garbage collector runs on another gets every field's getter: the class the getters come from is
    kept alive while they are read (a collected class's namespace is emptied under its mapping proxy)."""
    stop = threading.Event()

    def collect() -> None:
        while not stop.is_set():
            gc.collect(0)

    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-6)  # switch threads often, so collections land inside the reads
    collector = threading.Thread(target=collect)
    collector.start()
    try:
        made = [_getters.__wrapped__(GETTERS) for _ in range(2000)]
    finally:
        stop.set()
        collector.join()
        sys.setswitchinterval(interval)
    assert all(len(getters) == GETTERS for getters in made)
    assert made[-1][3].__get__((0, 1, 2, 3)) == 3
