"""The console under load leaves the server to the agents: a person's page reads its data off the event
loop (SQLite: on a worker thread, with a connection of its own) and pages render one at a time, so
however many people load heavy pages, one thread takes turns with the loop that answers the agents.
(How long an agent's call takes meanwhile is measured in tools/bench_tabs.py --loads, not here.)"""

from __future__ import annotations

import threading

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_harness.arguments import AddTasksArgs, ListTasksArgs
from mcp_harness.console.app import Console
from mcp_harness.console.auth import TokenLogin
from mcp_harness.console.routes import build
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from mcp_harness.store import sqlite as store_sqlite

pytestmark = pytest.mark.anyio
HOST = "console.test"


async def seed(harness: Harness, workspace: str) -> Identity:
    me = Identity(workspace, "planner")
    keys = [f"root-{i}" for i in range(20)]
    await harness.tasks.add(me, AddTasksArgs(tasks=[TaskSpec(key=k, title=f"Root {k}") for k in keys]))
    await harness.tasks.add(
        me, AddTasksArgs(tasks=[TaskSpec(key=f"leaf-{i}", title="Leaf", depends_on=keys) for i in range(60)])
    )
    return me


async def test_a_pages_reads_run_off_the_event_loop(sqlite_url, workspace, monkeypatch):
    from support import settings_for

    async with Harness.open(settings_for(sqlite_url)) as harness:
        me = await seed(harness, workspace)
        loop_thread = threading.get_ident()
        seen: list[bool] = []  #: for each statement: did it run on the loop's thread?
        real = store_sqlite._fetch_all

        def watched(db, query, params):  # noqa: ANN001, ANN202
            seen.append(threading.get_ident() == loop_thread)
            return real(db, query, params)

        monkeypatch.setattr(store_sqlite, "_fetch_all", watched)
        person = Identity(workspace, "olga", "operator")
        for read in (harness.console.board(person), harness.console.graph(person), harness.console.stuck(person)):
            seen.clear()
            await read
            assert seen and not any(seen), "a page's statements run on a worker thread"
        seen.clear()
        await harness.tasks.list(me, ListTasksArgs())
        assert seen and all(seen), "an agent's reads stay on the loop (microseconds, no thread hop)"


async def test_pages_render_one_at_a_time(harness: Harness, workspace: str):
    await seed(harness, workspace)
    console = Console(harness, TokenLogin(harness.console_sessions))
    app = Starlette(routes=[Mount("/ui", app=build(console, [HOST]))])
    token = await harness.tokens.create(workspace, "olga", "operator")
    real, running, most = console.render_now, [0], [0]

    def render(*args):  # noqa: ANN002, ANN202
        running[0] += 1
        most[0] = max(most[0], running[0])
        try:
            threading.Event().wait(0.02)  # long enough for the others to arrive
            return real(*args)
        finally:
            running[0] -= 1

    console.render_now = render  # type: ignore[method-assign]
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=f"http://{HOST}") as client:
        signed = await client.post("/ui/login", data={"token": token}, headers={"origin": f"http://{HOST}"})
        assert signed.status_code == 303

        async def load(path: str) -> None:
            assert (await client.get(path)).status_code == 200

        async with anyio.create_task_group() as tg:
            for path in ("/ui/board", "/ui/graph", "/ui/tasks", "/ui/stuck", "/ui/board") * 2:
                tg.start_soon(load, f"{path}?w={workspace}")
    assert most[0] == 1, f"{most[0]} pages rendered at once"
