"""A live part rendered once for every open tab at the same version (console/shared.py): the same
bytes to each tab of one sign-in, a render of its own for another role or session, and a new render
once the workspace changes. Through the console's real ASGI app, on both backends."""

from __future__ import annotations

import re

import anyio
import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs
from mcp_harness.console.app import Console
from mcp_harness.console.auth import TokenLogin
from mcp_harness.console.routes import build
from mcp_harness.console.shared import parts_of
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio
HOST = "console.test"
LIVE = {"hx-request": "true", "hx-target": "live"}


async def signed_in(app: Starlette, harness: Harness, workspace: str, name: str, role: str) -> httpx2.AsyncClient:
    token = await harness.tokens.create(workspace, name, role)
    client = httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=f"http://{HOST}")
    got = await client.post("/ui/login", data={"token": token}, headers={"origin": f"http://{HOST}"})
    assert got.status_code == 303, got.text[:200]
    return client


def csrf_of(page: str) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page)
    assert found, "a signed-in page carries its session's CSRF token"
    return found.group(1)


async def test_tabs_share_one_render_per_version_and_role_and_a_change_renders_again(harness: Harness, workspace: str):
    me = Identity(workspace, "planner")
    await harness.tasks.add(
        me, AddTasksArgs(tasks=[TaskSpec(key="a", title="First"), TaskSpec(key="b", title="Second")])
    )
    console = Console(harness, TokenLogin(harness.console_sessions))
    app = Starlette(routes=[Mount("/ui", app=build(console, [HOST]))])
    parts = parts_of(console)
    feed = harness.console.changes
    await feed.wait(feed.version_of(workspace), 0.2, workspace=workspace)  # the feed's baseline
    url = f"/ui/board?w={workspace}"

    olga = await signed_in(app, harness, workspace, "olga", "operator")
    rita = await signed_in(app, harness, workspace, "rita", "reader")
    try:
        olga_csrf = csrf_of((await olga.get(url)).text)
        rita_csrf = csrf_of((await rita.get(url)).text)
        assert olga_csrf != rita_csrf
        assert parts.renders == 0, "full pages are rendered per request, never shared"

        # ten tabs of one sign-in at once: one render, the same bytes to each
        tabs = []

        async def tab() -> None:
            got = await olga.get(url, headers=LIVE)
            assert got.status_code == 200
            tabs.append(got.content)

        async with anyio.create_task_group() as tg:
            for _ in range(10):
                tg.start_soon(tab)
        assert parts.renders == 1
        assert len(set(tabs)) == 1 and b"First" in tabs[0]
        again = await olga.get(url, headers=LIVE)
        assert again.content == tabs[0] and parts.renders == 1

        # another role (and session) gets a render of its own, never the operator's bytes
        reader = await rita.get(url, headers=LIVE)
        assert reader.status_code == 200 and parts.renders == 2
        assert olga_csrf.encode() not in reader.content
        assert rita_csrf.encode() not in again.content

        # a change: the next refresh renders again and shows it
        seen = feed.version_of(workspace)
        got = await harness.tasks.claim(Identity(workspace, "worker-7"), ClaimTaskArgs(task_key="a"))
        assert got.task is not None
        with anyio.fail_after(10):
            while feed.version_of(workspace) == seen:
                await feed.wait(seen, 1.0, workspace=workspace)
        fresh = await olga.get(url, headers=LIVE)
        assert parts.renders == 3
        assert fresh.content != tabs[0] and b"worker-7" in fresh.content

        # signed out: the shared part is not served to a request that is no longer signed in
        await olga.post("/ui/logout", data={"csrf": olga_csrf}, headers={"origin": f"http://{HOST}"})
        after = await olga.get(url, headers=LIVE)
        assert after.status_code == 204 and after.headers.get("hx-redirect", "").endswith("/ui/login")
        assert parts.renders == 3
    finally:
        await olga.aclose()
        await rita.aclose()
