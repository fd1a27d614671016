"""Backup, retention and schema evolution: export/import round trip, prune, migrations."""

from __future__ import annotations

import json
import secrets

import anyio
import pytest
from support import call, mcp_client, run_cli, settings_for, sqlite_at_version

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ListCheckpointsArgs, ListTasksArgs, RestoreStateArgs, SaveCheckpointArgs
from mcp_harness.errors import InvalidArgument
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


async def populate(url: str, workspace: str) -> None:
    async with mcp_client(url, workspace, agent="coder") as c:
        await call(c, "save_checkpoint", state={"goal": "ship", "notes": ["a"]}, label="start", metadata={"m": 1})
        await call(c, "save_checkpoint", mode="merge", state={"notes": ["a", "b"], "big": "x" * 500})
        await call(c, "save_checkpoint", state={"other": True}, thread="feat/x")
        tasks = [
            {"key": "t1", "title": "one", "tags": ["ui", "api"], "steps": ["s"]},
            {"key": "t2", "title": "two", "depends_on": ["t1"], "priority": 3},
        ]
        await call(c, "add_tasks", tasks=tasks)
        await call(
            c,
            "record_progress",
            summary="did things",
            status="done",
            next_steps=["more"],
            task_key="t1",
            artifacts={"commit": "abc"},
        )
        got = await call(c, "claim_task", lease_seconds=600)  # a live lease must survive too
        assert got["task"]["key"] == "t1"


async def export_text(url: str, workspace: str | None) -> list[str]:
    async with Harness.open(settings_for(url)) as h:
        return [line async for line in h.maintenance.export(workspace)]


def comparable(lines: list[str]) -> list[str]:
    return [line for line in lines if '"type":"header"' not in line and '"type": "header"' not in line]


async def test_export_import_round_trips_exactly(db_url, workspace, tmp_path):
    await populate(db_url, workspace)
    async with Harness.open(settings_for(db_url)) as h:  # a runner's records travel with the workspace
        await h.runs.register(workspace, f"run_{workspace}", "host-a", 4242)
        session = f"s-{workspace}"
        await h.runs.start_session(
            workspace,
            session,
            runner=f"run_{workspace}",
            slot=1,
            agent=f"claude-code:{workspace[-8:]}",
            task_key="t1",
            kind="work",
            transcript="/data/transcripts/x.jsonl",
        )
        await h.runs.end_session(
            session,
            "completed",
            exit_code=0,
            turns=4,
            cost=0.02,
            last_tool="mcp__harness__update_task",
            last_words="Finished t1.",
        )
    first = await export_text(db_url, workspace)
    header = json.loads(first[0])
    assert header["format"] == "mcp-harness-export" and header["workspaces"] == [workspace]
    target = f"sqlite+aiosqlite:///{tmp_path / 'restored.db'}"
    async with Harness.open(settings_for(target)) as h:
        counts = await h.maintenance.import_lines(first)
    assert counts["checkpoint"] == 3 and counts["task"] == 2 and counts["progress"] == 1
    assert counts["runner"] == 1 and counts["agent_session"] == 1
    assert comparable(await export_text(target, workspace)) == comparable(first)
    async with mcp_client(target, workspace, agent="coder") as c:
        brief = await call(c, "restore_state", label="start")
        assert brief["state"] == {"goal": "ship", "notes": ["a"]} and brief["checkpoint"]["metadata"] == {"m": 1}
        latest = await call(c, "restore_state")
        assert latest["state"]["notes"] == ["a", "b"] and latest["my_tasks"][0]["key"] == "t1"
        assert (await call(c, "list_tasks", tag="api"))["tasks"][0]["key"] == "t1"
        nxt = await call(c, "save_checkpoint", state={"after": "import"})
        assert nxt["version"] == 3  # versions continue where they were


async def test_a_workspace_holding_only_tasks_is_listed_exported_and_imported(db_url, workspace, tmp_path):
    """Adding tasks gives the workspace its row (it had none: `export` of all workspaces passed it over
    and an export of it alone could not be imported)."""
    async with mcp_client(db_url, workspace, agent="planner") as c:
        await call(c, "add_tasks", tasks=[{"key": "a", "title": "a"}, {"key": "b", "title": "b", "depends_on": ["a"]}])
    async with Harness.open(settings_for(db_url)) as h:
        assert workspace in await h.maintenance.workspaces()
    lines = await export_text(db_url, workspace)
    target = f"sqlite+aiosqlite:///{tmp_path / 'restored.db'}"
    async with Harness.open(settings_for(target)) as h:
        assert (await h.maintenance.import_lines(lines))["task"] == 2
        listing = await h.tasks.list(Identity(workspace, "x"), ListTasksArgs())
        assert [(t.key, t.ready) for t in listing.tasks] == [("a", True), ("b", False)]


async def test_migration_7_gives_workspaces_holding_only_tasks_their_row(sqlite_url, workspace, tmp_path):
    import sqlite3

    made = tmp_path / "current.db"
    async with Harness.open(settings_for(str(made))) as h:
        await h.tasks.add(Identity(workspace, "a"), AddTasksArgs(tasks=[{"key": "a", "title": "a"}]))
    with sqlite3.connect(made) as raw:  # as a version 6 database left it: no row for the workspace
        raw.execute("DELETE FROM workspaces WHERE name = ?", (workspace,))
    sqlite_at_version(sqlite_url.split("///", 1)[1], str(made), 6)
    async with Harness.open(settings_for(sqlite_url)) as h:
        assert workspace in await h.maintenance.workspaces()


async def test_import_refuses_existing_data_and_bad_input(sqlite_url, workspace, tmp_path):
    await populate(sqlite_url, workspace)
    lines = await export_text(sqlite_url, workspace)
    async with Harness.open(settings_for(sqlite_url)) as h:
        with pytest.raises(InvalidArgument, match="already has data"):
            await h.maintenance.import_lines(lines)
    fresh = f"sqlite+aiosqlite:///{tmp_path / 'fresh.db'}"
    async with Harness.open(settings_for(fresh)) as h:
        with pytest.raises(InvalidArgument, match="not an mcp-harness export header"):
            await h.maintenance.import_lines(['{"type":"checkpoint"}'])
        broken = lines[:5] + ["{not json"] + lines[5:]
        with pytest.raises(InvalidArgument, match="line 6 is not JSON"):
            await h.maintenance.import_lines(broken)
        # nothing of the failed import was kept: a clean import still works
        counts = await h.maintenance.import_lines(lines)
        assert counts["checkpoint"] == 3


@pytest.mark.slow  # runs the CLI as a process
def test_export_import_cli_round_trip(tmp_path):
    src, dst = tmp_path / "a.db", tmp_path / "b.db"
    ws = f"cli-{secrets.token_hex(3)}"
    anyio.run(populate, f"sqlite+aiosqlite:///{src}", ws)
    out = run_cli("export", "--db", str(src), "--workspace", ws)
    assert out.returncode == 0 and out.stdout.count("\n") > 5
    dump = tmp_path / "dump.jsonl"
    dump.write_text(out.stdout)
    imported = run_cli("import", str(dump), "--db", str(dst))
    assert imported.returncode == 0 and "3 checkpoint" in imported.stdout, imported.stderr
    again = run_cli("export", "--db", str(dst), "--workspace", ws)
    assert comparable(again.stdout.splitlines()) == comparable(out.stdout.splitlines())


async def test_prune_keeps_last_and_labelled_and_returns_space(db_url, workspace):
    ident = Identity(workspace=workspace, agent="a")
    async with Harness.open(settings_for(db_url)) as h:
        await h.checkpoints.save(ident, SaveCheckpointArgs(state={"v": 0, "blob": "L" * 50_000}, label="keep-me"))
        for i in range(1, 30):
            await h.checkpoints.save(ident, SaveCheckpointArgs(state={"v": i, "blob": f"{i}" * 50_000}))
        before = await h.db.size_bytes()
        report = await h.maintenance.prune(keep_last=3, workspace=workspace)
        assert report.checkpoints_deleted == 26 and report.values_deleted >= 26
        versions = [c.version for c in (await h.checkpoints.list(ident, ListCheckpointsArgs(limit=200))).checkpoints]
        assert versions == [30, 29, 28, 1]
        assert (await h.restore(ident, RestoreStateArgs(label="keep-me"))).state["blob"] == "L" * 50_000
        assert (await h.restore(ident, RestoreStateArgs(version=28))).state["v"] == 27
        if h.db.is_sqlite:
            assert await h.db.size_bytes() < before / 3, "prune must give the space back"
        with pytest.raises(InvalidArgument, match="at least 1"):
            await h.maintenance.prune(keep_last=0, workspace=workspace)


async def test_prune_older_than_only_narrows(sqlite_url, workspace):
    ident = Identity(workspace=workspace, agent="a")
    async with Harness.open(settings_for(sqlite_url)) as h:
        for i in range(5):
            await h.checkpoints.save(ident, SaveCheckpointArgs(state={"v": i}))
        clock.advance(10 * 86400)
        for i in range(5, 8):
            await h.checkpoints.save(ident, SaveCheckpointArgs(state={"v": i}))
        report = await h.maintenance.prune(keep_last=1, older_than_days=5, workspace=workspace)
        assert report.checkpoints_deleted == 5  # the recent ones stay although keep_last is 1
        versions = [c.version for c in (await h.checkpoints.list(ident, ListCheckpointsArgs())).checkpoints]
        assert versions == [8, 7, 6]
