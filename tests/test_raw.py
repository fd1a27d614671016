"""Prebuilt statements on SQLite's fast path give exactly what SQLAlchemy gives, or run through it."""

from __future__ import annotations

import pytest
from conftest import settings_for
from sqlalchemy import bindparam, select
from sqlalchemy.exc import IntegrityError

from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store import raw
from mcp_harness.store.common import ensure_workspace, workspaces
from mcp_harness.store.tasks import tasks

pytestmark = pytest.mark.anyio

TASK = raw.prebuilt(
    select(tasks).where(tasks.c.workspace == bindparam("p_ws")).order_by(tasks.c.id)  # booleans among them
)
TASK_SLOW = select(tasks).where(tasks.c.workspace == bindparam("p_ws")).order_by(tasks.c.id)


async def test_fast_rows_equal_sqlalchemy_rows(db_url, workspace):
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(Identity(workspace, "a"), tasks=[TaskSpec(key="a", title="A"), TaskSpec(key="b", title="B")])
        async with h.db.read() as conn:
            fast = (await conn.execute(TASK, {"p_ws": workspace})).mappings().all()
            slow = [dict(r) for r in (await conn.execute(TASK_SLOW, {"p_ws": workspace})).mappings()]
            assert raw.raw_sql(TASK, conn.dialect) is not None, "the statement must take the fast path"
            assert raw.raw_sql(TASK_SLOW, conn.dialect) is None
        assert fast == slow and len(fast) == 2
        assert fast[0]["ready"] is True and fast[0]["blocked"] is False  # booleans, not 0/1
        assert [type(v) for v in fast[0].values()] == [type(v) for v in slow[0].values()]


async def test_missing_parameters_fall_back_to_column_defaults(sqlite_url):
    async with Harness.open(settings_for(sqlite_url)) as h:
        async with h.db.write() as conn:
            # the prebuilt insert names progress_seq, which is not given: SQLAlchemy applies the default
            await ensure_workspace(conn, "defaults")
        async with h.db.read() as conn:
            stmt = select(workspaces.c.progress_seq).where(workspaces.c.name == "defaults")
            assert (await conn.execute(stmt)).scalar_one() == 0


INSERT_WORKSPACE = raw.prebuilt(workspaces.insert().values(name=bindparam("p_n"), progress_seq=0, created_at=1.0))


async def test_driver_errors_keep_sqlalchemy_types(db_url, workspace):
    async with Harness.open(settings_for(db_url)) as h:
        async with h.db.write() as conn:
            await conn.execute(INSERT_WORKSPACE, {"p_n": workspace})
        with pytest.raises(IntegrityError):
            async with h.db.write() as conn:
                await conn.execute(INSERT_WORKSPACE, {"p_n": workspace + "-rolled-back"})
                await conn.execute(INSERT_WORKSPACE, {"p_n": workspace})
        async with h.db.read() as conn:  # the failed transaction left nothing behind
            stmt = select(workspaces.c.name).where(workspaces.c.name.like(workspace + "%"))
            assert (await conn.execute(stmt)).scalars().all() == [workspace]


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


@pytest.mark.parametrize("through", ["driver", "sqlalchemy"])
async def test_a_failed_write_leaves_nothing_whichever_path_its_statements_took(db_url, workspace, through):
    """Writer transactions begin on the driver; a statement through SQLAlchemy joins them. Either way
    an error rolls back everything, and a success commits everything."""
    plain = workspaces.insert().values(name=bindparam("p_n"), progress_seq=0, created_at=1.0)
    stmt = INSERT_WORKSPACE if through == "driver" else plain
    async with Harness.open(settings_for(db_url)) as h:
        with pytest.raises(RuntimeError):
            async with h.db.write() as conn:
                await conn.execute(stmt, {"p_n": workspace + "-gone"})
                raise RuntimeError("the body failed")
        async with h.db.write() as conn:
            await conn.execute(stmt, {"p_n": workspace + "-kept"})
            await conn.execute(INSERT_WORKSPACE, {"p_n": workspace + "-kept-too"})
        async with h.db.read() as conn:
            names = select(workspaces.c.name).where(workspaces.c.name.like(workspace + "%")).order_by(workspaces.c.name)
            assert (await conn.execute(names)).scalars().all() == [workspace + "-kept", workspace + "-kept-too"]
