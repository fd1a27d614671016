"""The change feed: one per process, it hears commits by any process (LISTEN/NOTIFY on PostgreSQL,
`PRAGMA data_version` on SQLite), and it wakes claims that wait for work in other processes."""

from __future__ import annotations

import anyio
import pytest
from conftest import settings_for
from console_support import agent_call

from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store import changes
from mcp_harness.store.urls import pg_dsn

pytestmark = pytest.mark.anyio


async def test_one_feed_per_database_per_process(harness: Harness):
    assert changes.feed(harness.db) is changes.feed(harness.db) is harness.console.changes


async def test_a_write_that_changed_nothing_notifies_nobody(harness: Harness, workspace: str):
    ident = Identity(workspace, "a")
    feed = changes.feed(harness.db)
    if harness.db.is_sqlite:
        seen = feed.version
        await feed.wait(seen, 0.1)  # the watcher's baseline
        seen = feed.version
        assert (await harness.tasks.claim(ident)).task is None  # a write transaction that wrote nothing
        assert await feed.wait(seen, 0.3) == seen
        await harness.progress.record(ident, summary="a change")
        assert await feed.wait(seen, 30) != seen
        return
    # PostgreSQL: count the NOTIFYs themselves (the feed also watches transaction ids, which any
    # database on the server hands out)
    import asyncpg

    heard: list[str] = []
    listener = await asyncpg.connect(pg_dsn(harness.db.url)[0])
    try:
        await listener.add_listener(changes.CHANNEL, lambda *args: heard.append(args[-1]))
        assert (await harness.tasks.claim(ident)).task is None
        await harness.progress.record(ident, summary="a change")
        with anyio.fail_after(30):
            while not heard:
                await anyio.sleep(0.01)
        await anyio.sleep(0.2)
        assert len(heard) == 1
    finally:
        await listener.close()


@pytest.mark.slow
async def test_the_feed_hears_a_commit_by_another_process(harness: Harness, workspace: str):
    feed = changes.feed(harness.db)
    seen = feed.version
    async with anyio.create_task_group() as tg:
        result: list[int] = []

        async def wait() -> None:
            result.append(await feed.wait(seen, 60))

        tg.start_soon(wait)
        await anyio.to_thread.run_sync(
            lambda: agent_call(harness.db.url, workspace, "other", "record_progress", summary="from elsewhere")
        )
    assert result[0] != seen


@pytest.mark.slow
async def test_a_waiting_claim_is_woken_by_a_task_added_in_another_process(db_url: str, workspace: str):
    # A poll interval longer than the wait: only the change feed can wake this claim in time.
    async with Harness.open(settings_for(db_url, poll_interval_seconds=120)) as h:
        ident = Identity(workspace, "waiter")
        await h.tasks.add(ident, tasks=[TaskSpec(key="first", title="taken at once")])
        assert (await h.tasks.claim(ident)).task.key == "first"
        got = []
        async with anyio.create_task_group() as tg:

            async def claim() -> None:
                got.append(await h.tasks.claim(ident, wait_seconds=50))

            tg.start_soon(claim)
            await anyio.sleep(0.3)  # the claim is waiting now
            await anyio.to_thread.run_sync(
                lambda: agent_call(db_url, workspace, "planner", "add_tasks", tasks=[{"key": "late", "title": "L"}])
            )
        assert got[0].task is not None and got[0].task.key == "late"
        assert h.console.changes.claim_waits >= 1
