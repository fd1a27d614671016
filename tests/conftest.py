"""Fixtures: real SQLite files and a real PostgreSQL database, the real MCP server and client.

The PostgreSQL leg reads MCP_HARNESS_TEST_POSTGRES_URL (CI sets it); each test run creates its own
database on that server and drops it at the end, and each test works in a workspace of its own.
"""

from __future__ import annotations

import os
import secrets
import subprocess
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp import Client
from support import PG_ENV, mcp_client, settings_for

from mcp_harness import clock
from mcp_harness.service import Harness


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


@pytest.fixture
async def harness(db_url: str) -> AsyncIterator[Harness]:
    async with Harness.open(settings_for(db_url, backoff_base_seconds=1.0)) as h:
        yield h


@pytest.fixture
async def client(db_url: str, workspace: str) -> AsyncIterator[Client]:
    async with mcp_client(db_url, workspace) as c:
        yield c


@pytest.fixture(scope="session")
def claude_binary() -> Path:
    """The pinned real Claude Code binary (`MCP_HARNESS_TEST_CLAUDE`, else installed once with npm);
    the test is skipped, saying why, where it cannot be had."""
    from support import claude_code

    try:
        return claude_code.locate()
    except RuntimeError as exc:
        pytest.skip(str(exc))
