"""What a claim and a complete cost the database: served as a tool call, a claim that takes a task and
the complete of a task nothing depends on are ONE statement each on PostgreSQL (no transaction around
it) and ONE commit each on SQLite, the caller's contact row (the console's "who is alive, and why idle")
written with the change; the SQLite writer checkpoints on a count of its own commits. On SQLite and
PostgreSQL."""

from __future__ import annotations

import pytest
from support import settings_for

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.mcp.server import create_server
from mcp_harness.models import TaskSpec
from mcp_harness.oversight.store import reads as console_store
from mcp_harness.service import Harness, Identity
from mcp_harness.store import engine, sqlite
from mcp_harness.store.connection import Query
from mcp_harness.store.postgres import PgConnection

pytestmark = pytest.mark.anyio


class Counted:
    """The statements run (PostgreSQL), the transactions opened and the commits made (SQLite)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, db: engine.Database) -> None:
        self.statements: list[str] = []
        self.transactions = 0
        self.commits = 0
        for method in ("execute", "execute_many", "fetch_all", "fetch_value"):
            original = getattr(PgConnection, method)

            async def recorded(conn, query: Query, *args, _original=original):
                self.statements.append(query.name)
                return await _original(conn, query, *args)

            monkeypatch.setattr(PgConnection, method, recorded)
        opened = db._pg_transaction

        def transaction(**options):
            self.transactions += 1
            return opened(**options)

        monkeypatch.setattr(db, "_pg_transaction", transaction)
        ended = engine.end_transaction

        def end(conn, *, commit: bool) -> None:
            self.commits += commit
            ended(conn, commit=commit)

        monkeypatch.setattr(engine, "end_transaction", end)

    def clear(self) -> None:
        self.statements, self.transactions, self.commits = [], 0, 0


async def outcome(h: Harness, workspace: str, agent: str) -> str | None:
    async with h.db.read() as conn:
        rows = await console_store.contacts(conn, workspace, 10)
    return {row.agent: row.claim_outcome for row in rows}.get(agent)


async def test_a_claim_and_a_complete_write_once_with_the_contact_row(db_url, workspace, monkeypatch):
    settings = settings_for(db_url)
    async with Harness.open(settings) as h:
        ident = Identity(workspace, "agent")
        await h.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(key=f"t{i}", title=f"task {i}") for i in range(3)]))
        server = create_server(settings, ident, harness=h)
        await server.call_tool("list_tasks", {"limit": 1})  # the first call writes the agent's liveness
        counted = Counted(monkeypatch, h.db)
        for key in ("t0", "t1"):
            counted.clear()
            got = (await server.call_tool("claim_task", {"lease_seconds": 300})).structured_content
            assert got["task"]["key"] == key
            if h.db.is_sqlite:
                assert counted.commits == 1, "the claim, its event and the contact row: one transaction"
            else:
                assert (counted.statements, counted.transactions) == ([counted.statements[0]], 0)
                assert counted.statements[0].startswith("claim(") and "contact" in counted.statements[0]
            assert await outcome(h, workspace, "agent") == "claimed"
            counted.clear()
            args = {"task_key": key, "action": "complete", "lease_token": got["lease"]["token"], "verification": "v"}
            done = (await server.call_tool("update_task", args)).structured_content
            assert done["status"] == "done"
            if h.db.is_sqlite:
                assert counted.commits == 1, "the complete, its event, its search row and the contact row"
            else:
                assert len(counted.statements) == 1 and counted.transactions == 0, counted.statements
            assert await outcome(h, workspace, "agent") == f"completed:{key}"
        story = await h.tasks.story(ident, "t1")
        assert [e.kind for e in story.events][-2:] == ["claim", "complete"]


async def test_a_claim_outside_a_tool_call_writes_no_contact_row(db_url, workspace):
    """The service's own callers (the runner, a person's CLI) make no MCP call: no contact is recorded."""
    async with Harness.open(settings_for(db_url)) as h:
        ident = Identity(workspace, "script")
        await h.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(key="a", title="A")]))
        got = await h.tasks.claim(ident, ClaimTaskArgs())
        await h.tasks.update(
            ident, UpdateTaskArgs(task_key="a", action="complete", lease_token=got.lease.token, verification="v")
        )
        assert await outcome(h, workspace, "script") is None


async def test_the_sqlite_writer_checkpoints_every_so_many_of_its_commits(tmp_path, monkeypatch):
    """Several processes writing kept SQLite's automatic checkpoint running after every commit once the
    WAL was past its limit; the writer checkpoints on a count of its own commits instead."""
    ran: list[int] = []
    monkeypatch.setattr(engine, "checkpoint", lambda conn: ran.append(1))
    db = engine.Database(settings_for(str(tmp_path / "c.db")).db_url)
    await db.open()
    try:
        async with db.write() as conn:
            limit = await conn.fetch_value(Query("PRAGMA wal_autocheckpoint"))
        assert limit == sqlite.WAL_LIMIT_PAGES
        ran.clear()
        for _ in range(2 * sqlite.CHECKPOINT_EVERY):
            async with db.write():
                pass
        assert len(ran) == 2
    finally:
        await db.close()
