"""What the runner says, in process and without starting a session: a tag filter that matches no task
is named as such (with the tags in use), counts agree with their nouns, a signal is named as it was
sent, and `sessions show` gives money as the summaries do."""

from __future__ import annotations

import json
import signal
import uuid
from pathlib import Path
from typing import Any

import anyio
import pytest
from support import settings_for

from mcp_harness.arguments import AddTasksArgs
from mcp_harness.cli.main import main
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


@pytest.mark.anyio
async def test_one_session_is_one_session_and_a_signal_is_named_as_sent(harness, workspace, tmp_path, capsys):
    run = runner(harness, workspace, tmp_path)
    run.tally.started = 1
    run._summary(0)
    assert ": 1 session (none);" in capsys.readouterr().out
    run._on_signal(signal.SIGTERM)
    said = capsys.readouterr().out
    assert "SIGTERM: starting nothing more, stopping the sessions (a second SIGTERM: at once)" in said, said
    run._on_signal(signal.SIGTERM)
    assert "second SIGTERM: stopping every session now" in capsys.readouterr().out
    by_hand = runner(harness, workspace, tmp_path)
    by_hand._on_signal(signal.SIGINT)
    assert "(a second Ctrl-C: at once)" in capsys.readouterr().out


def test_sessions_show_gives_the_cost_rounded_and_json_keeps_the_number(tmp_path, capsys):
    db, workspace, session = str(tmp_path / "h.db"), "w", str(uuid.uuid4())

    async def record() -> None:
        async with Harness.open(settings_for(db)) as h:
            await h.runs.register(workspace, "run_x", "box", 1)
            await h.runs.start_session(
                workspace, session, runner="run_x", slot=1, agent="a", task_key="t", kind="work", transcript=None
            )
            await h.runs.end_session(
                session, "completed", exit_code=0, turns=3, cost=0.1 + 0.2, last_tool=None, last_words=None
            )

    anyio.run(record)
    assert main(["sessions", "show", session[:8], "--db", db, "--workspace", workspace]) == 0
    out = capsys.readouterr().out
    assert "cost_usd: 0.3000\n" in out, out
    assert main(["sessions", "show", session[:8], "--db", db, "--workspace", workspace, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["cost_usd"] == 0.1 + 0.2


@pytest.mark.anyio
async def test_an_initializer_that_planned_nothing_names_the_command_that_shows_its_transcript(
    harness, workspace, tmp_path, capsys, monkeypatch
):
    started: list[str] = []

    async def session(self: Runner, slot: int, session: str, *rest: object, **kw: object) -> None:
        started.append(session)  # the session plans nothing (no agent starts)

    monkeypatch.setattr(Runner, "_session", session)
    spec = tmp_path / "spec.md"
    spec.write_text("build it")
    assert await runner(harness, workspace, tmp_path, spec=spec).run() == 2
    out = capsys.readouterr().out
    assert f"read its transcript (`mcp-harness sessions show {started[0][:8]}`)" in out, out


@pytest.mark.anyio
async def test_a_run_with_tags_says_its_tasks_are_done_not_all_of_them(harness, workspace, tmp_path, capsys):
    from mcp_harness.arguments import ClaimTaskArgs, UpdateTaskArgs
    from mcp_harness.runner.loop import EXIT_DONE

    await add(harness, workspace, {"key": "d", "title": "D", "tags": ["docs"]}, {"key": "other", "title": "O"})
    me = Identity(workspace, "x")
    got = await harness.tasks.claim(me, ClaimTaskArgs(task_key="d"))
    assert got.lease is not None
    await harness.tasks.update(
        me, UpdateTaskArgs(task_key="d", action="complete", lease_token=got.lease.token, verification="read it")
    )
    assert await runner(harness, workspace, tmp_path, tags=["docs"]).run() == EXIT_DONE
    out = capsys.readouterr().out
    assert "all tasks with the tag docs are done" in out and "all tasks are done" not in out, out
