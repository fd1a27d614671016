"""The lifecycle hooks as the real Claude Code runs them (`mcp-harness init`'s entries, a scripted model):
what they leave in the database after a headless run, and what the session-start brief tells the model."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from support import settings_for
from support.claude_code import environment, run_claude, trust
from support.scripted_model import ScriptedModel, error

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
    act(db, lambda h: h.tasks.add(Identity(WORKSPACE, "planner"), tasks=[TaskSpec(key="k", title="K")]))
    with ScriptedModel([error(500)]) as model:
        env = environment(tmp_path / "home", model.url, XDG_RUNTIME_DIR=str(tmp_path))
        run = run_claude(claude_binary, project, env, "start")
    assert run.result.get("is_error") and run.result.get("api_error_status") == 500, run.result
    notes = notes_by_harness(db, wait=30)
    assert len(notes) == 1 and "stopped on" in notes[0] and notes[0].endswith("it may go on: its leases stay"), notes
