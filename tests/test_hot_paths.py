"""What the agents' calls run: literal SQL on the store's `Connection`, never SQLAlchemy (whose
per-statement work once cost more than the SQL, and which a fast path could silently fall back to);
and the store modules they run in import no SQLAlchemy (that the service imports no database
library at all is test_layers.py's). On SQLite and PostgreSQL."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from conftest import settings_for
from sqlalchemy import event

from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store.connection import Query
from mcp_harness.store.postgres import PgConnection
from mcp_harness.store.sqlite import SqliteConnection

pytestmark = pytest.mark.anyio

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_harness"
#: store modules whose functions run inside `Database.write/read/single`: literal SQL only
HOT_STORE_MODULES = [
    "checkpoints", "common", "connection", "idempotency", "postgres", "progress", "queries", "records", "schemas",
    "segments", "tasks", "tokens",
]  # fmt: skip


def imported(path: Path) -> set[str]:
    """Top-level packages a module imports."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_hot_store_modules_do_not_import_sqlalchemy():
    for name in HOT_STORE_MODULES:
        found = imported(PACKAGE / "store" / f"{name}.py") & {"sqlalchemy", "sqlmodel"}
        allowed = {"sqlalchemy"} if name == "postgres" else set()  # make_url, to read the configured URL
        assert found <= allowed, f"store/{name}.py imports {found}"


async def workload(h: Harness, ident: Identity) -> None:
    """Every tool's common paths: saves (blobs, inline values, chains, merges, schemas), restores,
    listings, progress, tasks from add to reopen, claims with and without filters or keys, replays."""
    c, t = h.checkpoints, h.tasks
    await h.schemas.set_schema(ident, "main", {"type": "object"})
    messages = [{"n": n, "text": "word " * 30} for n in range(40)]
    await c.save(ident, state={"big": "x" * 500, "n": 1, "messages": messages}, label="first")
    await c.save(ident, state={"messages": messages + [{"n": 40}], "extra": {"k": 1}}, mode="merge")
    await c.save(ident, state={"extra": {"j": 2}}, mode="merge", idempotency_key="save-1")
    await c.save(ident, state={"extra": {"j": 2}}, mode="merge", idempotency_key="save-1")  # replayed
    await h.restore(ident)
    await h.restore(ident, version=1, paths=["/messages/3/n"])
    await h.restore(ident, label="first")
    await h.restore(ident, checkpoint_id=(await c.list(ident, limit=1)).checkpoints[0].checkpoint_id)
    await c.list(ident, limit=2, before_version=3)
    await h.progress.recent(ident, thread="main", limit=5, before_seq=10)
    specs = [TaskSpec(key="a", title="A", tags=["x"]), TaskSpec(key="b", title="B", depends_on=["a"]),
             TaskSpec(key="c", title="C"), TaskSpec(key="d", title="D", tags=["y"])]  # fmt: skip
    await t.add(ident, tasks=specs)
    await h.progress.record(ident, summary="did a thing", task_key="a", next_steps=["more"])
    a = await t.claim(ident, tags=["x"])
    await t.update(ident, task_key="a", action="heartbeat", lease_token=a.lease.token, lease_seconds=60)
    await t.update(ident, task_key="a", action="complete", lease_token=a.lease.token, verification="v")
    b = await t.claim(ident, task_key="b", idempotency_key="claim-b")
    await t.update(ident, task_key="b", action="release", lease_token=b.lease.token)
    b = await t.claim(ident, task_key="b")
    await t.update(ident, task_key="b", action="fail", lease_token=b.lease.token, error="e", retry=False)
    c_ = await t.claim(ident)
    await t.update(ident, task_key=c_.task.key, action="complete", lease_token=c_.lease.token, verification="v")
    await t.update(ident, task_key="a", action="reopen", reason="again")
    await t.claim(ident, tags=["nothing"])  # nothing to claim: the reasons
    await t.list(ident, status=["pending", "blocked"], tag="x")
    await t.list(ident)
    await t.story(ident, "a")
    await h.tokens.verify("mcph_not-a-token")
    await h.checkpoints.purge_idempotency_keys()


async def test_agents_calls_run_only_literal_sql(db_url, workspace, monkeypatch):
    async with Harness.open(settings_for(db_url)) as h:
        through_sqlalchemy: list[str] = []
        event.listen(h.db._engine.sync_engine, "before_cursor_execute",
                     lambda _c, _cur, statement, *_rest: through_sqlalchemy.append(statement))  # fmt: skip
        ran: list[str] = []
        for cls in (SqliteConnection, PgConnection):
            for method in ("execute", "execute_many", "fetch_all", "fetch_one", "fetch_value"):
                original = getattr(cls, method)

                async def recorded(self, query: Query, *args, _original=original):
                    ran.append(query.name)
                    return await _original(self, query, *args)

                monkeypatch.setattr(cls, method, recorded)
        await workload(h, Identity(workspace, "agent"))
    assert through_sqlalchemy == [], "a hot path ran SQLAlchemy"
    expected = {
        "LOCK_THREAD", "INSERT_CHECKPOINT", "ADVANCE_THREAD", "INSERT_BLOB", "ADD_SEGMENT", "SEGMENT_CHAIN",
        "LATEST_CHECKPOINT", "CHECKPOINT_BY_VERSION", "CHECKPOINT_BY_LABEL", "CHECKPOINT_BY_ID", "LIST_CHECKPOINTS",
        "LIST_CHECKPOINTS_BEFORE", "STORED_RESULT", "STORE_RESULT", "INSERT_PROGRESS", "NEXT_PROGRESS_SEQ",
        "INSERT_TASK", "claim(True, False)", "claim(False, True)", "claim(False, False)", "HELD_BY", "TASK_COUNTS",
        "why_nothing(True, False)", "task_page(True, True)", "task_page(True, False)", "DEPENDENTS_OF",
        "DEPENDENCIES_OF", "LIVE_TOKEN", "PURGE_RESULTS", "NEXT_SCHEMA_VERSION", "INSERT_SCHEMA",
        "recent_progress(True, False, True)", "recent_progress(False, False, False)",
        "TASK_EVENTS", "INSERT_TASK_EVENT", "waiting(True, False)",
    }  # fmt: skip
    if db_url.startswith("sqlite"):  # SQLite claims as three statements under its write lock (see claim())
        claims = {name for name in expected if name.startswith("claim(")}
        expected = (expected - claims) | {name.replace("claim(", "claim_pick(") for name in claims} | {"CLAIM_BY_ID"}
    assert expected <= set(ran), f"not run: {sorted(expected - set(ran))}"
    assert all(name for name in ran), "every query the store runs is a named one from queries.py"
    assert any(name.startswith("update_leased(") and name.endswith("leaf_only=True)") for name in ran)
