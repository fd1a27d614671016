"""The session runner under test: a project, its tasks, `mcp-harness run` as a real process driving the
real Claude Code against a `ScriptedModel`, and scripted agents that behave in one way each."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import anyio

from mcp_harness.arguments import AddTasksArgs, ListTasksArgs, RestoreStateArgs
from mcp_harness.config import Settings
from mcp_harness.service import Harness, Identity

from .claude_code import environment
from .scripted_model import Step, Turn, load, say, tool

PLANNER = "planner"


def task_of(turn: Turn) -> tuple[str, str]:
    """The task key and lease token the runner's prompt names."""
    text = turn.prompt()
    key = re.search(r'^  key: "([^"]+)"$', text, re.MULTILINE)
    token = re.search(r"^Lease token: (\S+)$", text, re.MULTILINE)
    assert key and token, f"the runner's prompt names no task: {text[:500]}"
    return key.group(1), token.group(1)


def completes(turn: Turn, *, verification: str = "ran the checks") -> list[Step]:
    """A model that completes its task as the session rules say."""
    key, token = task_of(turn)
    return [
        load("update_task", "record_progress"),
        tool(
            "update_task",
            {"task_key": key, "action": "complete", "lease_token": token, "verification": verification, "result": key},
        ),
        tool("record_progress", {"summary": f"did {key}", "task_key": key, "next_steps": ["the next task"]}),
        say(f"Finished {key}."),
    ]


def acts(action: str, **extra: Any) -> Callable[[Turn], list[Step]]:
    """A model that takes one other action on its task (release with a reason, fail with an error)."""

    def script(turn: Turn) -> list[Step]:
        key, token = task_of(turn)
        return [
            load("update_task"),
            tool("update_task", {"task_key": key, "action": action, "lease_token": token, **extra}),
            say(f"I took {action} on {key}."),
        ]

    return script


def project(root: Path) -> Path:
    """A git repository with a first commit."""
    folder = root / "proj"
    folder.mkdir()
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=folder, check=True)
    (folder / "README").write_text("a project\n")
    subprocess.run([*git, "add", "."], cwd=folder, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], cwd=folder, check=True)
    return folder


async def _with(db: str, fn: Callable[[Harness], Any]) -> Any:
    async with Harness.open(Settings.from_env(db)) as h:
        return await fn(h)


def harness_do(db: str, fn: Callable[[Harness], Any]) -> Any:
    """Run `fn(harness)` on the database (in this process, between runner processes)."""
    return anyio.run(_with, db, fn)


def add_tasks(db: str, workspace: str, tasks: Sequence[dict[str, Any]]) -> None:
    harness_do(db, lambda h: h.tasks.add(Identity(workspace, PLANNER), AddTasksArgs(tasks=list(tasks))))


def board(db: str, workspace: str) -> dict[str, Any]:
    """key -> the task's full row (status, attempts, context...)."""

    async def read(h: Harness) -> dict[str, Any]:
        ident = Identity(workspace, "test")
        listed = await h.tasks.list(
            ident, ListTasksArgs(status=["pending", "claimed", "in_review", "done", "failed", "cancelled"])
        )
        rows = {}
        for row in listed.tasks:
            full = await h.tasks.list(ident, ListTasksArgs(task_key=row.key))
            rows[row.key] = full.tasks[0].model_dump(mode="json", context={"every_field": True})
        return rows

    return harness_do(db, read)


def sessions(db: str, workspace: str) -> list[dict[str, Any]]:
    async def read(h: Harness) -> list[dict[str, Any]]:
        return [r.model_dump(mode="json") for r in await h.runs.list(Identity(workspace, "test"))]

    return harness_do(db, read)


def story(db: str, workspace: str, key: str) -> dict[str, Any]:
    return harness_do(db, lambda h: h.tasks.story(Identity(workspace, "test"), key)).model_dump(mode="json")


def runner_command(db: str, workspace: str, *flags: str, claude: Path | None = None) -> list[str]:
    command = [sys.executable, "-m", "mcp_harness", "run", "--db", db, "--workspace", workspace]
    if claude is not None:
        command += ["--claude", str(claude)]
    return [*command, *flags]


def runner_env(home: Path, model_url: str, **extra: str) -> dict[str, str]:
    """The runner's environment: what a Claude Code process needs, a quick stop ladder."""
    return environment(home, model_url, MCP_HARNESS_RUNNER_STOP_GRACE="2", **extra)


def run(
    db: str, workspace: str, cwd: Path, env: dict[str, str], *flags: str, claude: Path | None, timeout: float = 180
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        runner_command(db, workspace, *flags, claude=claude),
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
        stdin=subprocess.DEVNULL,
    )


def progress_of(db: str, workspace: str, agent: str = "runner") -> list[dict[str, Any]]:
    async def read(h: Harness) -> list[dict[str, Any]]:
        got = await h.restore(Identity(workspace, "test"), RestoreStateArgs(progress_limit=100))
        return [e.model_dump(mode="json") for e in got.recent_progress if e.agent == agent]

    return harness_do(db, read)


def dumps(value: Any) -> str:
    return json.dumps(value, indent=1)
