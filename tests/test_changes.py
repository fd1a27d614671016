"""The change feed: one per process, it hears commits by any process (LISTEN/NOTIFY on PostgreSQL,
`PRAGMA data_version` on SQLite), per workspace, and it wakes claims that wait for work in other
processes (and nothing that waits on another workspace)."""

from __future__ import annotations

import anyio
import pytest
from support import settings_for
from support.console import agent_call

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, RecordProgressArgs, SaveCheckpointArgs, UpdateTaskArgs
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
        seen = feed.version_of(workspace)
        await feed.wait(seen, 0.1, workspace=workspace)  # the watcher's baseline
        seen = feed.version_of(workspace)
        assert (
            await harness.tasks.claim(ident, ClaimTaskArgs())
        ).task is None  # a write transaction that wrote nothing
        assert await feed.wait(seen, 0.3, workspace=workspace) == seen
        await harness.progress.record(ident, RecordProgressArgs(summary="a change"))
        assert await feed.wait(seen, 30, workspace=workspace) != seen
        return
    # PostgreSQL: count the NOTIFYs themselves (the feed also watches transaction ids, which any
    # database on the server hands out)
    import asyncpg

    heard: list[str] = []
    listener = await asyncpg.connect(pg_dsn(harness.db.url)[0])
    try:
        await listener.add_listener(changes.CHANNEL, lambda *args: heard.append(args[-1]))
        assert (await harness.tasks.claim(ident, ClaimTaskArgs())).task is None
        await harness.progress.record(ident, RecordProgressArgs(summary="a change"))
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
    seen = feed.version_of(workspace)
    async with anyio.create_task_group() as tg:
        result: list[int] = []

        async def wait() -> None:
            result.append(await feed.wait(seen, 60, workspace=workspace))

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
        await h.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(key="first", title="taken at once")]))
        assert (await h.tasks.claim(ident, ClaimTaskArgs())).task.key == "first"
        got = []
        async with anyio.create_task_group() as tg:

            async def claim() -> None:
                got.append(await h.tasks.claim(ident, ClaimTaskArgs(wait_seconds=50)))

            tg.start_soon(claim)
            await anyio.sleep(0.3)  # the claim is waiting now
            await anyio.to_thread.run_sync(
                lambda: agent_call(db_url, workspace, "planner", "add_tasks", tasks=[{"key": "late", "title": "L"}])
            )
        assert got[0].task is not None and got[0].task.key == "late"
        assert h.console.changes.claim_waits >= 1


async def _writes(h: Harness, ident: Identity, n: int) -> None:
    """Every kind of write a workspace sees: tasks added, claimed (one statement on PostgreSQL, no
    NOTIFY), completed; progress; checkpoints."""
    for i in range(n):
        key = f"t{i}-{anyio.current_time()}"
        await h.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(key=key, title="work")]))
        got = await h.tasks.claim(ident, ClaimTaskArgs(task_key=key))
        await h.tasks.update(
            ident, UpdateTaskArgs(task_key=key, action="complete", lease_token=got.lease.token, verification="ok")
        )
        await h.progress.record(ident, RecordProgressArgs(summary=f"note {i}"))
        await h.checkpoints.save(ident, SaveCheckpointArgs(state={"i": i}))


async def test_a_write_in_one_workspace_wakes_nothing_that_waits_on_another(harness: Harness, workspace: str):
    feed = changes.feed(harness.db)
    a, b = Identity(f"{workspace}-a", "writer"), Identity(f"{workspace}-b", "waiter")
    await harness.progress.record(b, RecordProgressArgs(summary="b exists"))
    checks = 0

    async def check() -> bool:
        nonlocal checks
        checks += 1
        return False

    seen = feed.version_of(b.workspace)
    async with anyio.create_task_group() as tg:
        tg.start_soon(lambda: feed.wait_until(check, 2.0, workspace=b.workspace, recheck=60, local=anyio.Event()))
        await anyio.sleep(0.2)  # the claim waits, and the feed has B's baseline
        await _writes(harness, a, 5)
        await anyio.sleep(1.2)  # PostgreSQL's look for writes without a NOTIFY comes once a second
    assert checks == 1  # only at the timeout: no write in A woke it
    assert feed.version_of(b.workspace) == seen
    # and a write in B does wake its waiters
    async with anyio.create_task_group() as tg:
        woken: list[int] = []

        async def wait() -> None:
            woken.append(await feed.wait(seen, 30, workspace=b.workspace))

        tg.start_soon(wait)
        await anyio.sleep(0.2)
        await harness.progress.record(b, RecordProgressArgs(summary="now B"))
    assert woken[0] != seen


async def test_a_claim_without_notify_wakes_its_own_workspace(harness: Harness, workspace: str):
    """PostgreSQL's claims are single statements that send no NOTIFY: the once-a-second look at the
    workspace's fingerprint still catches them (on SQLite every commit is seen)."""
    ident = Identity(workspace, "a")
    await harness.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(key="k", title="t")]))
    feed = changes.feed(harness.db)
    seen = feed.version_of(workspace)
    async with anyio.create_task_group() as tg:
        woken: list[int] = []

        async def wait() -> None:
            woken.append(await feed.wait(seen, 30, workspace=workspace))

        tg.start_soon(wait)
        await anyio.sleep(0.2)
        assert (await harness.tasks.claim(Identity(workspace, "b"), ClaimTaskArgs(task_key="k"))).task is not None
    assert woken[0] != seen


async def test_writes_in_another_database_on_the_server_wake_nothing(harness: Harness, workspace: str):
    if harness.db.is_sqlite:
        pytest.skip("PostgreSQL only: one server, many databases")
    import asyncpg

    feed = changes.feed(harness.db)
    seen = feed.version_of(workspace)
    other = await asyncpg.connect(pg_dsn(harness.db.url)[0].rsplit("/", 1)[0] + "/postgres")
    try:
        await other.execute("CREATE TEMP TABLE busy (x int)")
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: feed.wait(seen, 2.5, workspace=workspace))
            for i in range(200):  # every one hands out a transaction id on the server
                await other.execute("INSERT INTO busy VALUES ($1)", i)
                await anyio.sleep(0.01)
    finally:
        await other.close()
    assert feed.version_of(workspace) == seen


@pytest.mark.slow
async def test_writes_by_another_process_in_one_workspace_wake_no_claim_waiting_in_another(db_url: str, workspace: str):
    async with Harness.open(settings_for(db_url, poll_interval_seconds=120)) as h:
        b = Identity(f"{workspace}-b", "waiter")
        await h.progress.record(b, RecordProgressArgs(summary="b exists"))
        feed = h.console.changes
        seen = feed.version_of(b.workspace)
        async with anyio.create_task_group() as tg:
            got: list = []

            async def claim() -> None:
                got.append(await h.tasks.claim(b, ClaimTaskArgs(wait_seconds=60)))

            tg.start_soon(claim)
            await anyio.sleep(0.3)
            await anyio.to_thread.run_sync(
                lambda: agent_call(db_url, f"{workspace}-a", "planner", "add_tasks", tasks=[{"key": "x", "title": "X"}])
            )
            await anyio.sleep(1.2)
            assert feed.version_of(b.workspace) == seen  # A's add woke nothing in B
            await anyio.to_thread.run_sync(
                lambda: agent_call(db_url, b.workspace, "planner", "add_tasks", tasks=[{"key": "y", "title": "Y"}])
            )
        assert got[0].task is not None and got[0].task.key == "y"


async def test_a_change_by_this_process_wakes_only_claims_waiting_in_its_workspace(db_url: str, workspace: str):
    async with Harness.open(settings_for(db_url, poll_interval_seconds=120)) as h:
        a, b = Identity(f"{workspace}-a", "writer"), Identity(f"{workspace}-b", "waiter")
        waits: list[str] = []
        real = h.tasks.wakeup.wait_for_work

        async def counted(ident: Identity, *args: object) -> bool:
            waits.append(ident.workspace)
            return await real(ident, *args)

        h.tasks.wakeup.wait_for_work = counted  # type: ignore[method-assign]
        async with anyio.create_task_group() as tg:
            tg.start_soon(lambda: h.tasks.claim(b, ClaimTaskArgs(wait_seconds=2)))
            await anyio.sleep(0.2)
            await _writes(h, a, 5)  # adds, claims, completes in A, in this very process
        assert waits == [b.workspace]  # one wait, never woken by A's writes
