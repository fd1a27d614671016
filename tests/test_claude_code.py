"""The real Claude Code CLI against a scripted model and the real harness: what the README promises a
Claude Code user, read from what the client itself sends and does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.claude_code import environment, run_claude, trust
from support.scripted_model import ScriptedModel, load, say, tool

pytestmark = pytest.mark.slow


def init_project(root: Path, db: Path) -> Path:
    project = root / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(
        [sys.executable, "-m", "mcp_harness", "init", "--db", str(db)], cwd=project, check=True, capture_output=True
    )
    return project


def test_a_headless_session_can_call_the_harness_tools_after_init(tmp_path, claude_binary):
    project = init_project(tmp_path, tmp_path / "h.db")
    trust(tmp_path / "home", project)  # as a person's first interactive run does
    script = [load("restore_state"), tool("restore_state"), say("done")]
    with ScriptedModel(script) as model:
        run = run_claude(claude_binary, project, environment(tmp_path / "home", model.url), "start")
    assert run.server_status() == "connected", run.init.get("mcp_servers")
    results = run.tool_results()
    assert len(results) == 2, results
    text, is_error = results[1]
    assert not is_error, text
    assert json.loads(text)["you"]["agent"].startswith("claude-code:")
    assert not run.result.get("permission_denials"), run.result["permission_denials"]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the project but git's own, byte for byte."""
    files = (p for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.relative_to(root).parts)
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def test_init_allows_the_tools_and_remove_restores_the_project_byte_for_byte(tmp_path, claude_binary):
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    own = {"permissions": {"allow": ["Bash(npm test)"]}, "model": "opus"}
    (project / ".claude" / "settings.json").write_text(json.dumps(own, indent=2) + "\n")  # as init writes JSON
    (project / "CLAUDE.md").write_text("# Notes\n\nUse pnpm.\n")
    before = snapshot(project)
    harness = [sys.executable, "-m", "mcp_harness", "init", "--db", str(tmp_path / "h.db")]
    done = subprocess.run(harness, cwd=project, capture_output=True, text=True, check=True)
    assert "allowed the 'harness' tools (permissions.allow: mcp__harness)" in done.stdout, done.stdout
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["permissions"]["allow"] == ["Bash(npm test)", "mcp__harness"] and settings["model"] == "opus"
    trust(tmp_path / "home", project)
    script = [load("restore_state"), tool("restore_state"), say("done")]
    with ScriptedModel(script) as model:
        run = run_claude(claude_binary, project, environment(tmp_path / "home", model.url), "start")
    assert [is_error for _, is_error in run.tool_results()] == [False, False], run.tool_results()
    again = subprocess.run(harness, cwd=project, capture_output=True, text=True, check=True)
    assert "already allowed (mcp__harness) (unchanged)" in again.stdout, again.stdout
    removed = subprocess.run([*harness[:4], "--remove"], cwd=project, capture_output=True, text=True, check=True)
    assert "removed the permission mcp__harness" in removed.stdout, removed.stdout
    assert snapshot(project) == before
