"""Helpers the tests share (imported as `support`; pytest's fixtures stay in conftest.py): settings for a
database, the real MCP client on the real server, a tool call that must succeed or fail, a CLI run in a
process, an upgrade test's old layout."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import anyio
from mcp import Client

from mcp_harness.config import Settings
from mcp_harness.mcp.server import create_server
from mcp_harness.service import Identity

PG_ENV = "MCP_HARNESS_TEST_POSTGRES_URL"  #: names the PostgreSQL server the tests may use


def settings_for(url: str, **overrides: Any) -> Settings:
    base = Settings.from_env(url)
    return Settings(**{**base.__dict__, **overrides})


@asynccontextmanager
async def mcp_client(url: str, workspace: str, agent: str = "agent-a", **overrides: Any) -> AsyncIterator[Client]:
    """The official MCP client connected in-process to a real server on `url`."""
    server = create_server(settings_for(url, **overrides), Identity(workspace=workspace, agent=agent))
    async with Client(server, raise_exceptions=False) as client:
        yield client


class ToolFailed(AssertionError):
    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text
        self.code = text[1 : text.index("]")] if text.startswith("[") else None


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    """Call a tool; return its structured result or raise ToolFailed with the error text."""
    result = await client.call_tool(tool, arguments)
    text = result.content[0].text if result.content else ""
    if result.is_error:
        raise ToolFailed(text)
    assert result.structured_content is not None, f"{tool} returned no structured content"
    return result.structured_content


async def fail(client: Client, tool: str, **arguments: Any) -> ToolFailed:
    """Call a tool that must fail; return the failure (code and text)."""
    try:
        result = await call(client, tool, **arguments)
    except ToolFailed as exc:
        return exc
    raise AssertionError(f"{tool} should have failed but returned {result}")


async def drain(
    client: Client, agent: str, accepted: Counter, errors: list[str], *, lease_seconds: int = 300, idle: float = 0.01
) -> None:
    """A worker: claim and complete until the list is all done, counting accepted completions per key
    and collecting refused ones (a second accepted completion of one key would be a double claim)."""
    while True:
        got = await call(client, "claim_task", lease_seconds=lease_seconds)
        if got["task"] is None:
            if got["reason"] == "all_done":
                return
            await anyio.sleep(idle)
            continue
        result = await client.call_tool(
            "update_task",
            {
                "task_key": got["task"]["key"],
                "action": "complete",
                "lease_token": got["lease"]["token"],
                "verification": f"done by {agent}",
            },
        )
        if result.is_error:
            errors.append(result.content[0].text)
        else:
            accepted[got["task"]["key"]] += 1


def serve_command(url: str, workspace: str, agent: str) -> list[str]:
    return [sys.executable, "-m", "mcp_harness", "serve", "--db", url, "--workspace", workspace, "--agent", agent]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "LANG", "LC_", "PYTHON", "VIRTUAL"))}
    env.update(extra)
    return env


def run_cli(*args: str, env: dict[str, str] | None = None, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_harness", *args],
        capture_output=True,
        text=True,
        env=env or subprocess_env(),
        input=input,
        timeout=60,
    )


def sqlite_at_version(path: str, rows_from: str, version: int) -> None:
    """Make the SQLite file `path` a database at schema `version`: the released migrations' own SQL up
    to it, holding the rows of the (current) database file `rows_from`, column by column. A test of an
    upgrade builds its old layout this way, so a new migration needs no change to it."""
    import sqlite3

    from mcp_harness.store.migrations import MIGRATIONS

    with sqlite3.connect(path) as raw:
        for migration in MIGRATIONS[:version]:
            for statement in migration.statements("sqlite"):
                raw.execute(statement)
        raw.execute("ATTACH DATABASE ? AS made", (rows_from,))
        for (table,) in raw.execute("SELECT name FROM main.sqlite_master WHERE type = 'table'").fetchall():
            if table == "task_counts":
                continue  # kept by the triggers as the rows go in
            columns = ", ".join(f'"{row[1]}"' for row in raw.execute(f'PRAGMA main.table_info("{table}")'))
            raw.execute(f'INSERT INTO main."{table}" ({columns}) SELECT {columns} FROM made."{table}"')  # noqa: S608
        raw.execute("UPDATE harness_meta SET value = ? WHERE key = 'schema_version'", (str(version),))
        raw.commit()
        raw.execute("DETACH DATABASE made")
