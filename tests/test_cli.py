"""The command line for people: readable output, stable JSON, one-line errors."""

from __future__ import annotations

import json

import pytest
from support import call, mcp_client, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # every test here starts processes


@pytest.fixture
async def seeded(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace, agent="coder") as c:
        await call(
            c,
            "add_tasks",
            tasks=[
                {"key": "api", "title": "Build the API", "priority": 2},
                {"key": "ui", "title": "Build the UI", "depends_on": ["api"]},
            ],
        )
        await call(c, "claim_task", lease_seconds=600)
        await call(
            c,
            "record_progress",
            summary="api routes drafted",
            status="in_progress",
            task_key="api",
            next_steps=["add validation"],
            artifacts={"commit": "abc123"},
        )
        await call(c, "record_progress", summary="docs note", thread="docs")
        await call(c, "save_checkpoint", state={"phase": 1}, label="start")
        await call(c, "save_checkpoint", state={"phase": 2})
    return sqlite_url.split("///", 1)[1], workspace


async def test_log_is_readable_and_filterable(seeded):
    db, ws = seeded
    out = run_cli("log", "--db", db, "--workspace", ws)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert "docs note" in lines[1] and "api routes drafted" in out.stdout  # newest first
    api_row = next(line for line in lines if "api routes drafted" in line).split()
    assert api_row[4:7] == ["IN_PROGRESS", "api", "main"]  # status, task, thread columns of the entry's row
    assert "next: add validation" in out.stdout and "abc123" in out.stdout
    only_api = run_cli("log", "--db", db, "--workspace", ws, "--task", "api")
    assert "docs note" not in only_api.stdout and "api routes drafted" in only_api.stdout
    as_json = json.loads(run_cli("log", "--db", db, "--workspace", ws, "--thread", "docs", "--json").stdout)
    assert [e["summary"] for e in as_json] == ["docs note"]
    # a person's (or a script's) JSON keeps every field: only tool results leave out unset ones and `main`
    on_main = json.loads(run_cli("log", "--db", db, "--workspace", ws, "--thread", "main", "--json").stdout)
    assert on_main[0]["thread"] == "main" and "task_key" in on_main[0] and "details" in on_main[0]


async def test_task_board(seeded):
    db, ws = seeded
    out = run_cli("tasks", "--db", db, "--workspace", ws)
    assert out.returncode == 0, out.stderr
    assert "pending 1  claimed 1" in out.stdout
    api_line = next(line for line in out.stdout.splitlines() if line.startswith("api "))
    assert "claimed" in api_line and "coder" in api_line and "s left" in api_line and "1/3" in api_line
    board = json.loads(run_cli("tasks", "--db", db, "--workspace", ws, "--json").stdout)
    assert board["counts"]["claimed"] == 1
    assert all("token" not in (t["lease"] or {}) for t in board["tasks"]), "tokens never leave the server"


async def test_history_show_and_status(seeded):
    db, ws = seeded
    history = run_cli("history", "main", "--db", db, "--workspace", ws)
    lines = history.stdout.splitlines()
    assert history.returncode == 0 and lines[0].split() == [
        "VERSION",
        "SAVED",
        "(UTC)",
        "AGENT",
        "BYTES",
        "CHECKPOINT",
        "LABEL",
    ]
    assert lines[1].lstrip().startswith("v2") and lines[2].rstrip().endswith("start")
    listed = json.loads(run_cli("history", "main", "--json", "--db", db, "--workspace", ws).stdout)
    assert [c["version"] for c in listed] == [2, 1] and listed[1]["label"] == "start"
    assert listed[0]["parent_id"] == listed[1]["checkpoint_id"] and listed[0]["created_at"].endswith("Z")
    shown = run_cli("show", "main", "--version", "1", "--db", db, "--workspace", ws)
    assert json.loads(shown.stdout) == {"phase": 1}
    status = json.loads(run_cli("status", "--db", db, "--workspace", ws, "--json").stdout)
    assert status["threads"][0]["latest_version"] == 2 and status["task_counts"]["claimed"] == 1
    assert status["live_leases"][0]["task"] == "api" and status["live_leases"][0]["owner"] == "coder"
    assert status["database_bytes"] > 0
    readable = run_cli("status", "--db", db, "--workspace", ws)
    assert "live leases:" in readable.stdout and "api" in readable.stdout


async def test_errors_are_one_line(seeded):
    db, ws = seeded
    missing = run_cli("show", "nothing-here", "--db", db, "--workspace", ws)
    assert missing.returncode != 0 and missing.stderr.strip() == "mcp-harness: thread 'nothing-here' has no checkpoint"
    bad = run_cli("log", "--db", db, "--workspace", "bad name")
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "workspace" in bad.stderr
    scheme = run_cli("log", "--db", "mysql://x/y")
    assert scheme.returncode != 0 and "not supported" in scheme.stderr


async def test_status_shows_stuck_agents_and_largest_checkpoints(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace, agent="sleepy") as c:
        await call(c, "add_tasks", tasks=[{"key": "nap", "title": "Nap"}])
        await call(c, "claim_task", lease_seconds=10)
        await call(c, "save_checkpoint", state={"big": "b" * 5000}, thread="heavy")
    db = sqlite_url.split("///", 1)[1]  # the CLI is another process: age the lease in the file itself
    import sqlite3

    with sqlite3.connect(db) as raw:
        raw.execute("UPDATE tasks SET lease_expires_at = lease_expires_at - 3600")
    status = json.loads(run_cli("status", "--db", db, "--workspace", workspace, "--json").stdout)
    assert status["stuck"][0]["task"] == "nap" and status["stuck"][0]["owner"] == "sleepy"
    assert status["live_leases"] == []
    assert status["largest_checkpoints"][0]["thread"] == "heavy"
    assert "STUCK" in run_cli("status", "--db", db, "--workspace", workspace).stdout


def test_config_snippets(tmp_path):
    db = str(tmp_path / "cfg.db")
    desktop = run_cli("config", "claude-desktop", "--db", db, "--workspace", "proj")
    config = json.loads(desktop.stdout)["mcpServers"]["harness"]
    assert config["args"][:3] == ["serve", "--db", db] or config["args"][2:5] == ["serve", "--db", db]
    assert "--workspace" in config["args"] and "proj" in config["args"]
    code = run_cli("config", "claude-code", "--db", db, "--agent", "cc")
    assert code.stdout.startswith("claude mcp add harness -- ") and "--agent cc" in code.stdout
    remote = run_cli("config", "claude-code", "--transport", "http", "--url", "http://h:1/mcp", "--token", "mcph_x")
    assert (
        remote.stdout.strip()
        == "claude mcp add --transport http harness http://h:1/mcp --header 'Authorization: Bearer mcph_x'"
    )
    cursor = json.loads(run_cli("config", "cursor", "--transport", "http", "--token", "mcph_y").stdout)
    assert cursor["mcpServers"]["harness"]["headers"] == {"Authorization": "Bearer mcph_y"}
    bridge = json.loads(run_cli("config", "claude-desktop", "--transport", "http", "--token", "mcph_z").stdout)
    assert bridge["mcpServers"]["harness"]["env"] == {"HARNESS_TOKEN": "mcph_z"}
    vscode = json.loads(run_cli("config", "vscode", "--db", db, "--workspace", "proj").stdout)["servers"]["harness"]
    assert vscode["type"] == "stdio" and vscode["args"][-4:] == ["--workspace", "proj", "--agent", "vscode"]
    remote = json.loads(run_cli("config", "vscode", "--transport", "http", "--token", "mcph_v").stdout)
    assert remote["servers"]["harness"] == {
        "type": "http",
        "url": "http://127.0.0.1:8765/mcp",
        "headers": {"Authorization": "Bearer mcph_v"},
    }
