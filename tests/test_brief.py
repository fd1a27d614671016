"""`mcp-harness brief`: the resume brief as text, under 4 KB, from the database (the HTTP form is in
test_http.py)."""

from __future__ import annotations

import pytest
from support import call, mcp_client, run_cli

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # every test runs the command line in a process


async def test_brief_names_state_tasks_and_progress(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace, agent="coder") as c:
        await call(
            c,
            "add_tasks",
            tasks=[{"key": "api", "title": "Build the API", "priority": 2}, {"key": "docs", "title": "Write the docs"}],
        )
        await call(c, "claim_task", task_key="api")
        await call(c, "record_progress", summary="routes drafted", task_key="api", next_steps=["add validation"])
        await call(c, "record_progress", summary="design note")
        await call(c, "record_progress", summary="docs outline", thread="docs")  # one log: shown on main's brief
        await call(c, "save_checkpoint", state={"phase": "build"}, label="kickoff")
    db = sqlite_url.split("///", 1)[1]
    out = run_cli("brief", "--db", db, "--workspace", workspace, "--agent", "coder")
    assert out.returncode == 0 and out.stderr == "", out.stderr
    text = out.stdout
    assert f"workspace {workspace}" in text and '{"phase":"build"}' in text and 'label "kickoff"' in text
    assert "1 pending, 1 claimed" in text and 'You hold (agent coder): api "Build the API"' in text
    assert 'docs "Write the docs"' in text
    assert text.index("design note") < text.index("routes drafted")  # newest first
    assert "(docs): docs outline" in text and "(main): design note" in text
    assert "next: add validation" in text and "claim_task" in text
    other = run_cli("brief", "--db", db, "--workspace", workspace, "--agent", "someone-else")
    assert "You hold" not in other.stdout  # held tasks are the agent's own


async def test_brief_stays_under_4_kb(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace) as c:
        await call(c, "save_checkpoint", state={f"k{i}": "v" * 200 for i in range(100)})  # ~21 KB
        for i in range(5):
            await call(c, "record_progress", summary=f"entry {i} " + "word " * 200, next_steps=["x" * 400] * 5)
    out = run_cli("brief", "--db", sqlite_url.split("///", 1)[1], "--workspace", workspace)
    assert out.returncode == 0 and len(out.stdout.encode()) <= 4001  # 4,000 and print's newline
    assert "bytes in all: restore_state returns it whole" in out.stdout and "entry 4" in out.stdout


async def test_an_empty_workspace_gets_what_to_do_first(sqlite_url, workspace):
    db = sqlite_url.split("///", 1)[1]
    out = run_cli("brief", "--db", db, "--workspace", workspace)
    assert out.returncode == 0 and "has nothing yet" in out.stdout and "add_tasks" in out.stdout
    assert "this database holds" not in out.stdout
    async with mcp_client(sqlite_url, "elsewhere") as c:
        await call(c, "record_progress", summary="something")
    out = run_cli("brief", "--db", db, "--workspace", workspace)
    assert "has nothing yet" in out.stdout and "this database holds: elsewhere" in out.stdout


async def test_a_task_in_review_is_not_work_to_continue(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace, agent="coder") as c:
        await call(c, "add_tasks", tasks=[{"key": "api", "title": "Build the API", "review": True}])
        got = await call(c, "claim_task")
        await call(
            c,
            "update_task",
            task_key="api",
            action="complete",
            lease_token=got["lease"]["token"],
            verification="ran it",
        )
    out = run_cli("brief", "--db", sqlite_url.split("///", 1)[1], "--workspace", workspace, "--agent", "coder")
    assert out.returncode == 0, out.stderr
    assert 'Yours, in review: api "Build the API" (a person decides; do not work on it)' in out.stdout
    assert "a task in review waits for a person" in out.stdout and "You hold" not in out.stdout


async def test_brief_in_a_session_shows_that_sessions_tasks(sqlite_url, workspace):
    """Run from an agent's session (MCP_HARNESS_SESSION set, as `msg` and the guard read it), the brief is
    that session's agent's: its held task shows without --agent (a fresh-eyes trial saw none)."""
    from support import subprocess_env

    async with mcp_client(sqlite_url, workspace, agent="claude-code:cccccccc") as c:
        await call(c, "add_tasks", tasks=[{"key": "api", "title": "Build the API"}])
        await call(c, "claim_task", task_key="api")
    db = sqlite_url.split("///", 1)[1]
    env = subprocess_env(MCP_HARNESS_SESSION="cccccccc-1234")
    env.pop("MCP_HARNESS_AGENT", None)
    env.pop("MCP_HARNESS_NO_SESSION", None)
    out = run_cli("brief", "--db", db, "--workspace", workspace, env=env)
    assert 'You hold (agent claude-code:cccccccc): api "Build the API"' in out.stdout, out.stdout
    alone = subprocess_env()
    alone.pop("MCP_HARNESS_SESSION", None)
    alone.pop("CLAUDE_CODE_SESSION_ID", None)
    assert "You hold" not in run_cli("brief", "--db", db, "--workspace", workspace, env=alone).stdout
