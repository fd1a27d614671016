"""The store's one small interface: literal SQL run on sqlite3 or asyncpg, typed rows equal to what
SQLAlchemy reads of the same data, transactions that commit or leave nothing, and database errors
that leave the store as the store's own types. On SQLite and PostgreSQL."""

from __future__ import annotations

from typing import NamedTuple

import pytest
from conftest import settings_for
from sqlalchemy import select
from sqlalchemy.exc import SQLAlchemyError

from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store import StorageError, UniqueViolation, idempotency, queries, task_queries
from mcp_harness.store import tasks as task_store
from mcp_harness.store.backup import tasks, workspaces
from mcp_harness.store.common import ensure_workspace, next_progress_seq
from mcp_harness.store.connection import Query, numbered

pytestmark = pytest.mark.anyio


async def test_records_equal_what_sqlalchemy_reads(db_url, workspace):
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(Identity(workspace, "a"), tasks=[TaskSpec(key="a", title="A"), TaskSpec(key="b", title="B")])
        async with h.db.read() as conn:
            fast = await task_store.page(conn, workspace, statuses=None, tag=None, limit=10, after_id=0)
        async with h.db.cold_read() as conn:
            stmt = select(tasks).where(tasks.c.workspace == workspace).order_by(tasks.c.id)
            slow = [dict(r) for r in (await conn.execute(stmt)).mappings()]
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
    """`?prepared_statement_cache_size=0` (for PgBouncer in transaction mode) reaches asyncpg's own pool
    too; claims and completes (the single-statement path) work with it."""
    if not db_url.startswith("postgresql"):
        pytest.skip("a PostgreSQL URL setting")
    url = db_url + ("&" if "?" in db_url else "?") + "prepared_statement_cache_size=0"
    ident = Identity(workspace, "a")
    async with Harness.open(settings_for(url)) as h:
        await h.tasks.add(ident, tasks=[TaskSpec(key="a", title="A")])
        got = await h.tasks.claim(ident)
        done = await h.tasks.update(ident, task_key="a", action="complete", lease_token=got.lease.token,
                                    verification="checked")  # fmt: skip
        assert done.status == "done"
        assert h.db._driver_pool._connect_kwargs["statement_cache_size"] == 0


@pytest.mark.parametrize("through", ["write", "cold_write"])
async def test_a_failed_write_leaves_nothing_and_a_finished_one_commits(db_url, workspace, through):
    """Hot writes (literal SQL) and cold writes (SQLAlchemy) alike: an error rolls back everything,
    a success commits everything."""

    async def insert(conn, name: str) -> None:
        if through == "write":
            await conn.execute(queries.ENSURE_WORKSPACE, {"ws": name, "at": 1.0})
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
        await h.tasks.add(Identity(workspace, "a"), tasks=[TaskSpec(key="a", title="A")])
        swapped = Query('SELECT "key", title FROM tasks WHERE workspace = :ws', row=Renamed, name="swapped")
        with pytest.raises(StorageError, match="returns columns"):
            async with h.db.read() as conn:
                await conn.fetch_all(swapped, {"ws": workspace})
        unnamed = Query('SELECT "key", title, 1 + 1 FROM tasks WHERE workspace = :ws')
        async with h.db.read() as conn:
            row = await conn.fetch_one(unnamed, {"ws": workspace})
        assert (row.key, row.title, row.column2) == ("a", "A", 2)


def test_parameters_are_numbered_once_for_asyncpg():
    sql = "SELECT :a, :b, 'x:y', c::text FROM t WHERE d = :a AND e = ':b'"
    assert numbered(sql) == ("SELECT $1, $2, 'x:y', c::text FROM t WHERE d = $1 AND e = ':b'", ("a", "b"))
    claim = task_queries.claim(True, True)
    assert ":" not in claim.postgresql.replace("::", "") and "$" not in claim.sqlite
    assert set(claim.pg_names) == {"ws", "now", "agent", "token", "expires", "lease", "tags", "key", "fp"}
