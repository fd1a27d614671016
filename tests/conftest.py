"""Fixtures: real SQLite files and a real PostgreSQL database, the real MCP server and client.

The PostgreSQL leg reads MCP_HARNESS_TEST_POSTGRES_URL (CI sets it); each test run creates its own
database on that server and drops it at the end, and each test works in a workspace of its own.
"""

from __future__ import annotations

import os
import secrets
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import Client

from mcp_harness import clock
from mcp_harness.config import Settings
from mcp_harness.server import create_server
from mcp_harness.service import Harness, Identity

PG_ENV = "MCP_HARNESS_TEST_POSTGRES_URL"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # aiosqlite and asyncpg are asyncio-only


@pytest.fixture(autouse=True)
def _processes_only_in_slow_tests(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """`pytest -m "not slow"` is the quick loop: a test that starts a process must be marked slow."""
    if request.node.get_closest_marker("slow") is None:

        def refuse(*_args: Any, **_kwargs: Any) -> None:
            raise AssertionError(f"{request.node.nodeid} starts a process: mark it @pytest.mark.slow")

        monkeypatch.setattr(subprocess, "Popen", refuse)


@pytest.fixture(autouse=True)
def _reset_clock() -> Iterator[None]:
    clock.reset()
    yield
    clock.reset()


def _admin(url: str, sql: str) -> None:
    """Run one statement on the server's maintenance database (outside a transaction)."""
    import asyncio

    import asyncpg

    base = url.replace("postgresql+asyncpg://", "postgresql://", 1)
    admin = base.rsplit("/", 1)[0] + "/postgres"

    async def run() -> None:
        conn = await asyncpg.connect(admin)
        try:
            await conn.execute(sql)
        finally:
            await conn.close()

    asyncio.run(run())


@pytest.fixture(scope="session")
def postgres_url() -> Iterator[str]:
    """A fresh database for this test run on the server named by MCP_HARNESS_TEST_POSTGRES_URL."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"PostgreSQL tests need {PG_ENV} (e.g. postgresql+asyncpg://postgres@127.0.0.1:5432/test)")
    name = f"mcp_harness_test_{os.getpid()}_{secrets.token_hex(3)}"
    _admin(url, f'CREATE DATABASE "{name}"')
    yield url.rsplit("/", 1)[0] + "/" + name
    _admin(url, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Each storage test runs on both backends."""
    if request.param == "sqlite":
        return f"sqlite+aiosqlite:///{tmp_path / 'harness.db'}"
    return request.getfixturevalue("postgres_url")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite+aiosqlite:///{tmp_path / 'harness.db'}"


@pytest.fixture
def workspace() -> str:
    """A workspace of this test's own (PostgreSQL tests share one database per run)."""
    return f"ws-{secrets.token_hex(4)}"


def settings_for(url: str, **overrides: Any) -> Settings:
    base = Settings.from_env(url)
    return Settings(**{**base.__dict__, **overrides})


@pytest.fixture
async def harness(db_url: str) -> AsyncIterator[Harness]:
    async with Harness.open(settings_for(db_url, backoff_base_seconds=1.0)) as h:
        yield h


@asynccontextmanager
async def mcp_client(url: str, workspace: str, agent: str = "agent-a", **overrides: Any) -> AsyncIterator[Client]:
    """The official MCP client connected in-process to a real server on `url`."""
    server = create_server(settings_for(url, **overrides), Identity(workspace=workspace, agent=agent))
    async with Client(server, raise_exceptions=False) as client:
        yield client


@pytest.fixture
async def client(db_url: str, workspace: str) -> AsyncIterator[Client]:
    async with mcp_client(db_url, workspace) as c:
        yield c


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


async def drain(client: Client, agent: str, accepted: Counter, errors: list[str], *, lease_seconds: int = 300,
                idle: float = 0.01) -> None:  # fmt: skip
    """A worker: claim and complete until the list is all done, counting accepted completions per key
    and collecting refused ones (a second accepted completion of one key would be a double claim)."""
    while True:
        got = await call(client, "claim_task", lease_seconds=lease_seconds)
        if got["task"] is None:
            if got["reason"] == "all_done":
                return
            await anyio.sleep(idle)
            continue
        result = await client.call_tool("update_task", {
            "task_key": got["task"]["key"], "action": "complete", "lease_token": got["lease"]["token"],
            "verification": f"done by {agent}"})  # fmt: skip
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
