"""The runner's dry run, in process: the ready work, then the command each session would run, or what is
missing for any session to start (given apart from the agent, which is then None)."""

from __future__ import annotations

import pytest

from mcp_harness.arguments import AddTasksArgs
from mcp_harness.runner.agents import ClaudeCode, CommandAgent
from mcp_harness.runner.command import _dry_run
from mcp_harness.runner.loop import Options
from mcp_harness.service import Identity

pytestmark = pytest.mark.anyio


async def test_a_dry_run_names_the_agents_command_or_what_is_missing(harness, workspace, capsys):
    await harness.tasks.add(
        Identity(workspace, "ann"), AddTasksArgs.model_validate({"tasks": [{"key": "a", "title": "A"}]})
    )
    missing = "Claude Code's `claude` is not on PATH: install it"
    assert await _dry_run(harness, workspace, None, missing, Options()) == 2
    shown = capsys.readouterr()
    assert "1 task(s) ready now: a" in shown.out and f"no session could start: {missing}" in shown.err
    assert await _dry_run(harness, workspace, CommandAgent("my-agent {prompt}", []), None, Options(parallel=2)) == 0
    assert "each session would run: my-agent {prompt} (up to 2 at once)" in capsys.readouterr().out
    assert await _dry_run(harness, workspace, ClaudeCode("/opt/claude", []), None, Options()) == 0
    assert "each session would run: /opt/claude -p PROMPT ... (up to 1 at once)" in capsys.readouterr().out


async def test_a_dry_run_with_tags_lists_only_the_work_the_run_would_take(harness, workspace, capsys):
    tasks = [{"key": "api", "title": "A", "tags": ["backend"]}, {"key": "doc", "title": "D", "tags": ["docs"]}]
    await harness.tasks.add(
        Identity(workspace, "ann"), AddTasksArgs.model_validate({"tasks": [*tasks, {"key": "x", "title": "X"}]})
    )
    agent = CommandAgent("my-agent {prompt}", [])
    assert await _dry_run(harness, workspace, agent, None, Options(tags=["docs", "backend"])) == 0
    assert "2 task(s) with the tags docs, backend ready now: doc, api" in capsys.readouterr().out
    assert await _dry_run(harness, workspace, agent, None, Options(tags=["nosuchtag"])) == 0
    assert "0 task(s) with the tags nosuchtag ready now" in capsys.readouterr().out
