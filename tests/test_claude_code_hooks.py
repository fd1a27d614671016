"""The lifecycle hooks as the real Claude Code runs them (`mcp-harness init`'s entries, a scripted model):
what they leave in the database after a headless run, and what the session-start brief tells the model."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from support import settings_for
from support.claude_code import Run, environment, run_claude, trust
from support.scripted_model import ScriptedModel, error, load, say, tool

from mcp_harness.arguments import AddTasksArgs
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.slow

WORKSPACE = "proj"


def init_project(root: Path, db: Path) -> Path:
    """A git project set up by `mcp-harness init` (its workspace is the folder's name), trusted in the
    private HOME as a person's first interactive run does."""
    project = root / WORKSPACE
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    harness = [sys.executable, "-m", "mcp_harness", "init", "--db", str(db)]
    subprocess.run(harness, cwd=project, check=True, capture_output=True)
    trust(root / "home", project)
    return project


def act(db: Path, fn):  # noqa: ANN001, ANN201 - a test helper
    async def go():  # noqa: ANN202
        async with Harness.open(settings_for(str(db))) as h:
            return await fn(h)

    return anyio.run(go)


def notes_by_harness(db: Path, wait: float = 0.0) -> list[str]:
    """The harness's notes in the workspace, after up to `wait` seconds for the first one."""
    deadline = time.monotonic() + wait
    while True:
        found = act(db, lambda h: h.progress.recent(Identity(WORKSPACE, "reader"), limit=20))
        notes = [n.summary for n in found if n.agent == "harness"]
        if notes or time.monotonic() >= deadline:
            return notes
        time.sleep(0.2)


def test_the_stop_failure_note_survives_a_headless_run_that_ends_on_the_failure(tmp_path, claude_binary):
    """Claude Code kills a StopFailure hook's process group moments after `-p` exits on the failure:
    the hook leaves its write to a process of its own, which must outlive that (and hold none of the
    hook's pipes)."""
    db = tmp_path / "h.db"
    project = init_project(tmp_path, db)
    act(db, lambda h: h.tasks.add(Identity(WORKSPACE, "planner"), AddTasksArgs(tasks=[TaskSpec(key="k", title="K")])))
    with ScriptedModel([error(500)]) as model:
        env = environment(tmp_path / "home", model.url, XDG_RUNTIME_DIR=str(tmp_path))
        run = run_claude(claude_binary, project, env, "start")
    assert run.result.get("is_error") and run.result.get("api_error_status") == 500, run.result
    notes = notes_by_harness(db, wait=30)
    assert len(notes) == 1 and "stopped on" in notes[0] and notes[0].endswith("it may go on: its leases stay"), notes


def brief_of(run: Run) -> str:
    """The context the SessionStart hook gave the session (the run's `hook_response` event)."""
    [said] = [e for e in run.of("system", "hook_response") if e.get("hook_event") == "SessionStart"]
    return json.loads(said["output"])["hookSpecificOutput"]["additionalContext"]


def test_the_brief_says_a_lease_ended_with_its_session_and_that_the_task_is_claimable(tmp_path, claude_binary):
    """A session claims a task and ends: the next session's brief lists the task as ready to claim (a claim
    takes it first), saying its lease ended with its session (or connection); the first session, resumed, is told the
    same of the task it still holds, and that a heartbeat revives the lease until a claim takes it."""
    db = tmp_path / "h.db"
    project = init_project(tmp_path, db)
    act(
        db,
        lambda h: h.tasks.add(Identity(WORKSPACE, "planner"), AddTasksArgs(tasks=[TaskSpec(key="k", title="Ship it")])),
    )
    first = "1ea5e000-0000-4000-8000-000000000001"
    claims = [load("claim_task"), tool("claim_task", {"lease_seconds": 3600}), say("claimed")]
    script = lambda turn: claims if turn.session == first else [say("noted")]  # noqa: E731
    with ScriptedModel(script) as model:
        env = environment(tmp_path / "home", model.url, XDG_RUNTIME_DIR=str(tmp_path))
        run = run_claude(claude_binary, project, env, "start", "--session-id", first)
        assert '"key":"k"' in run.tool_results()[-1][0], run.tool_results()
        ended = lambda: act(db, lambda h: h.status(Identity(WORKSPACE, "reader")))["stuck"]  # noqa: E731
        deadline = time.monotonic() + 30
        while not (stuck := ended()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert stuck and stuck[0]["ended"], stuck

        [ready] = [
            line
            for line in brief_of(run_claude(claude_binary, project, env, "what next?")).splitlines()
            if line.startswith("Ready to claim")
        ]
        assert re.fullmatch(
            r'Ready to claim: k "Ship it" \(the lease of claude-code:1ea5e000 ended: its '
            r"(session|connection) ended .*; claimable\)",
            ready,
        ), ready

        brief = brief_of(run_claude(claude_binary, project, env, "go on", "--resume", first))
    [held] = [line for line in brief.splitlines() if line.startswith("You hold")]
    assert re.search(r'k "Ship it", attempt 1, lease ended \d+ s ago \(its (session|connection) ended', held), held
    assert held.endswith("any claim takes the task now; a heartbeat with its token revives it until one does"), held
    assert "Ready to claim" not in brief  # its own task is not offered to it as another's
