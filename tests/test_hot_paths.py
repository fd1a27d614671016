"""What the agents' calls run: named queries on the store's `Connection`, never SQLAlchemy (whose
per-statement work once cost more than the SQL, and which a fast path could silently fall back to);
and the store modules they run in import no SQLAlchemy (that the service imports no database
library at all is test_layers.py's; that a first restore_state loads none, test_startup_imports.py's).
On SQLite and PostgreSQL."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest
from support import settings_for

from mcp_harness.arguments import (
    AddTasksArgs,
    ClaimTaskArgs,
    ListCheckpointsArgs,
    ListTasksArgs,
    RecordProgressArgs,
    RestoreStateArgs,
    SaveCheckpointArgs,
    UpdateTaskArgs,
)
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store.connection import Query
from mcp_harness.store.postgres import PgConnection
from mcp_harness.store.sqlite import SqliteConnection

pytestmark = pytest.mark.anyio

PACKAGE = Path(__file__).resolve().parent.parent / "mcp_harness"
#: the cold paths (export/import, prune) and the declared tables they and the migration checks use:
#: the only store modules that may build SQL with SQLAlchemy
COLD = ("maintenance/store/", "store/cold.py", "store/tables.py")


def store_modules() -> list[Path]:
    """Every module of the database layer and of each concept's store."""
    found = [p for p in PACKAGE.rglob("*.py") if "store" in p.relative_to(PACKAGE).parts or p.stem == "store"]
    assert len(found) > 20, found  # the search found the stores
    return sorted(found)


def imported(path: Path) -> set[str]:
    """Top-level packages a module imports (when it runs: not those under `if TYPE_CHECKING:`)."""
    names: set[str] = set()
    tree = ast.parse(path.read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            node.body = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name.split(".")[0] for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_hot_store_modules_do_not_import_sqlalchemy():
    for path in store_modules():
        name = path.relative_to(PACKAGE).as_posix()
        if name.startswith(COLD):
            continue
        found = imported(path) & {"sqlalchemy", "sqlmodel"}
        assert found == set(), f"{name} imports {found}"


async def workload(h: Harness, ident: Identity) -> None:
    """Every tool's common paths: saves (blobs, inline values, chains, merges, schemas), restores,
    listings, progress, tasks from add to reopen, claims with and without filters or keys, replays."""
    c, t = h.checkpoints, h.tasks
    await h.schemas.set_schema(ident, "main", {"type": "object"})
    messages = [{"n": n, "text": "word " * 30} for n in range(40)]
    await c.save(ident, SaveCheckpointArgs(state={"big": "x" * 500, "n": 1, "messages": messages}, label="first"))
    await c.save(ident, SaveCheckpointArgs(state={"messages": messages + [{"n": 40}], "extra": {"k": 1}}, mode="merge"))
    await c.save(ident, SaveCheckpointArgs(state={"extra": {"j": 2}}, mode="merge", idempotency_key="save-1"))
    await c.save(
        ident, SaveCheckpointArgs(state={"extra": {"j": 2}}, mode="merge", idempotency_key="save-1")
    )  # replayed
    await h.restore(ident, RestoreStateArgs())
    await h.restore(ident, RestoreStateArgs(version=1, paths=["/messages/3/n"]))
    await h.restore(ident, RestoreStateArgs(label="first"))
    await h.restore(
        ident,
        RestoreStateArgs(
            checkpoint_id=(await c.list(ident, ListCheckpointsArgs(limit=1))).checkpoints[0].checkpoint_id
        ),
    )
    await c.list(ident, ListCheckpointsArgs(limit=2, before_version=3))
    await h.progress.recent(ident, thread="main", limit=5, before_seq=10)
    specs = [
        TaskSpec(key="a", title="A", tags=["x"]),
        TaskSpec(key="b", title="B", depends_on=["a"]),
        TaskSpec(key="c", title="C"),
        TaskSpec(key="d", title="D", tags=["y"]),
    ]
    await t.add(ident, AddTasksArgs(tasks=specs))
    await h.progress.record(ident, RecordProgressArgs(summary="did a thing", task_key="a", next_steps=["more"]))
    a = await t.claim(ident, ClaimTaskArgs(tags=["x"]))
    await t.update(ident, UpdateTaskArgs(task_key="a", action="heartbeat", lease_token=a.lease.token, lease_seconds=60))
    await t.update(ident, UpdateTaskArgs(task_key="a", action="complete", lease_token=a.lease.token, verification="v"))
    b = await t.claim(ident, ClaimTaskArgs(task_key="b", idempotency_key="claim-b"))
    await t.update(ident, UpdateTaskArgs(task_key="b", action="release", lease_token=b.lease.token))
    b = await t.claim(ident, ClaimTaskArgs(task_key="b"))
    await t.update(
        ident, UpdateTaskArgs(task_key="b", action="fail", lease_token=b.lease.token, error="e", retry=False)
    )
    c_ = await t.claim(ident, ClaimTaskArgs())
    await t.update(
        ident, UpdateTaskArgs(task_key=c_.task.key, action="complete", lease_token=c_.lease.token, verification="v")
    )
    await t.update(ident, UpdateTaskArgs(task_key="a", action="reopen", reason="again"))
    await t.claim(ident, ClaimTaskArgs(tags=["nothing"]))  # nothing to claim: the reasons
    await t.list(ident, ListTasksArgs(status=["pending", "blocked"], tag="x"))
    await t.list(ident, ListTasksArgs())
    await t.story(ident, "a")
    await h.tokens.verify("mcph_not-a-token")
    await h.checkpoints.purge_idempotency_keys()


async def test_agents_calls_run_only_literal_sql(db_url, workspace, monkeypatch):
    async with Harness.open(settings_for(db_url)) as h:
        ran: list[str] = []
        for cls in (SqliteConnection, PgConnection):
            for method in ("execute", "execute_many", "fetch_all", "fetch_one", "fetch_value"):
                original = getattr(cls, method)

                async def recorded(self, query: Query, *args, _original=original):
                    ran.append(query.name)
                    return await _original(self, query, *args)

                monkeypatch.setattr(cls, method, recorded)
        await workload(h, Identity(workspace, "agent"))
        assert h.db._cold is None, "a hot path made the cold paths' SQLAlchemy engine"
    expected = {
        "checkpoints.lock_thread",
        "checkpoints.insert_checkpoint",
        "checkpoints.advance_thread",
        "checkpoints.insert_blob",
        "checkpoints.latest_checkpoint",
        "checkpoints.checkpoint_by_version",
        "checkpoints.checkpoint_by_label",
        "checkpoints.checkpoint_by_id",
        "checkpoints.list_checkpoints",
        "checkpoints.list_checkpoints_before",
        "segments.add_segment",
        "segments.segment_chain",
        "idempotency.stored_result",
        "idempotency.store_result",
        "idempotency.purge_results",
        "progress.insert_progress",
        "workspaces.next_progress_seq",
        "tokens.live_token",
        "schemas.next_schema_version",
        "schemas.insert_schema",
        "recent_progress(True, False, True)",
        "recent_progress(False, False, False)",
        "tasks.insert_task",
        "claim(True, False, first, facts)",
        "claim(False, True, first, facts)",
        "claim(False, False, first, facts)",
        "tasks.held_by",
        "tasks.task_counts_ran_out",
        "empty_claim_counts(True, False)",
        "task_page(True, True)",
        "task_page(True, False)",
        "tasks.dependents_of",
        "tasks.dependencies_of",
        "tasks.task_events",
        "tasks.insert_task_event",
        "waiting(True, False)",
    }
    if db_url.startswith("sqlite"):  # SQLite claims as two statements under its write lock (see claim())
        claims = {name for name in expected if name.startswith("claim(")}
        picks = {name.replace("claim(", "claim_event(").replace(", facts", "") for name in claims}
        expected = (expected - claims) | picks | {"claim_taken(True)"}
    assert expected <= set(ran), f"not run: {sorted(expected - set(ran))}"
    assert all(name for name in ran), "every query the store runs is a named one (sql/*.sql, or a builder)"
    assert any(name.startswith("update_leased(") and name.endswith("leaf_only=True)") for name in ran)


@pytest.mark.slow
def test_a_sessions_first_restore_state_loads_no_sqlalchemy(tmp_path):
    """A session waits for its first call's answer: the real stdio server, spawned as a client does,
    answers initialize, tools/list and a first restore_state (opening and migrating a new database on
    the way) without importing SQLAlchemy or SQLModel (`-X importtime` lists every module it imports).
    They belong to export/import and prune only; loading them made the first answer 1.8x the no-op
    server's start (tools/bench_startup.py)."""
    import json
    import os
    import subprocess
    import sys

    messages = [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "initialize",
            "params": {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "t", "version": "0"},
            },
        },
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "restore_state", "arguments": {}}},
    ]
    command = [
        sys.executable,
        "-X",
        "importtime",
        "-m",
        "mcp_harness",
        "serve",
        "--db",
        str(tmp_path / "h.db"),
        "--workspace",
        "w",
        "--agent",
        "a",
    ]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_HARNESS_")}
    log = tmp_path / "imports.txt"
    with log.open("wb") as stderr:
        proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr, env=env)
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
        proc.stdin.flush()
        answers = {}
        while 3 not in answers:
            line = proc.stdout.readline()
            assert line, "the server exited before answering restore_state"
            answer = json.loads(line)
            answers[answer.get("id")] = answer
        imported = log.read_text()  # what the server imported up to its first answer
        proc.stdin.close()
        proc.wait(timeout=60)
        proc.stdout.close()
    assert answers[3]["result"]["isError"] is False, answers[3]
    modules = {line.rsplit("|", 1)[-1].strip() for line in imported.splitlines() if line.startswith("import time:")}
    assert "mcp_harness.store.engine" in modules, "the database was opened"
    assert {m for m in modules if m.split(".")[0] in ("sqlalchemy", "sqlmodel")} == set()
