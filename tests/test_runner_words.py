"""What the runner says, in process and without starting a session: a tag filter that matches no task
is named as such (with the tags in use)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from mcp_harness.arguments import AddTasksArgs
from mcp_harness.runner.agents import CommandAgent
from mcp_harness.runner.display import Display
from mcp_harness.runner.loop import EXIT_IDLE, Options, Runner
from mcp_harness.service import Harness, Identity


def runner(h: Harness, workspace: str, root: Path, **options: Any) -> Runner:
    """A runner whose agent never starts in these tests (nothing is claimable, or its session is stubbed)."""
    return Runner(
        h, workspace, CommandAgent("my-agent {prompt}", []), Options(**options), Display(1, live=False), root=root
    )


async def add(h: Harness, workspace: str, *tasks: dict[str, object]) -> None:
    await h.tasks.add(Identity(workspace, "ann"), AddTasksArgs.model_validate({"tasks": list(tasks)}))


@pytest.mark.anyio
@pytest.mark.parametrize(
    ("tags", "said"),
    [
        (["frontend"], "waiting: no task has the tag frontend (tags in use: backend, docs)"),
        (["frontend", "ui"], "waiting: no task has any of the tags frontend, ui (tags in use: backend, docs)"),
    ],
)
async def test_tags_that_match_no_task_are_named_with_the_tags_in_use(harness, workspace, tmp_path, capsys, tags, said):
    await add(harness, workspace, {"key": "a", "title": "A", "tags": ["backend"]}, {"key": "b", "title": "B"})
    await add(harness, workspace, {"key": "c", "title": "C", "tags": ["docs", "backend"]})
    code = await runner(harness, workspace, tmp_path, tags=tags, exit_when_idle=True).run()
    out = capsys.readouterr().out
    assert code == EXIT_IDLE, out  # still a wait for a person: it exits only with --exit-when-idle
    assert said in out and "none_pending" not in out, out
    assert ": 0 sessions (none);" in out, out


@pytest.mark.anyio
async def test_tags_in_a_workspace_whose_tasks_have_none_say_so(harness, workspace, tmp_path, capsys):
    await add(harness, workspace, {"key": "a", "title": "A"})
    assert await runner(harness, workspace, tmp_path, tags=["frontend"], exit_when_idle=True).run() == EXIT_IDLE
    assert "waiting: no task has the tag frontend (no task has a tag)" in capsys.readouterr().out
