"""What a person sees when a console action is refused: every contract error answers a 4xx status with
its message (503 while the database is away; 500 only for the unexpected), never a bare 500. Through the
console's real ASGI app, on both backends."""

from __future__ import annotations

import re

import httpx2
import pytest
from starlette.applications import Starlette
from starlette.routing import Mount

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, ListTasksArgs, MessageArgs
from mcp_harness.console.app import Console, status_of
from mcp_harness.console.auth import TokenLogin
from mcp_harness.console.routes import build
from mcp_harness.errors import ALL_CODES, HarnessError
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio
HOST = "console.test"
ORIGIN = {"origin": f"http://{HOST}"}


def test_every_error_code_has_its_status():
    by_code = {cls.code: cls for cls in HarnessError.__subclasses__()}
    assert set(ALL_CODES) <= set(by_code)
    for code in ALL_CODES:
        status = status_of(by_code[code]("x"))
        if code == "internal":
            assert status == 500
        elif code == "unavailable":
            assert status == 503
        else:
            assert 400 <= status < 500, (code, status)
    assert status_of(by_code["too_large"]("x")) == 413


async def test_actions_over_a_limit_answer_4xx_with_the_message(harness: Harness, workspace: str):
    alice = Identity(workspace, "alice")
    await harness.tasks.add(
        alice, AddTasksArgs(tasks=[TaskSpec(key="a", title="First"), TaskSpec(key="b", title="Second")])
    )
    await harness.tasks.claim(alice, ClaimTaskArgs(task_key="a"))
    asked = await harness.messages.act(alice, MessageArgs(action="send", to="operators", body="8080 or 9090?"))
    console = Console(harness, TokenLogin(harness.console_sessions))
    app = Starlette(routes=[Mount("/ui", app=build(console, [HOST]))])
    token = await harness.tokens.create(workspace, "olga", "operator")
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=f"http://{HOST}") as client:
        assert (await client.post("/ui/login", data={"token": token}, headers=ORIGIN)).status_code == 303
        page = (await client.get(f"/ui/task?w={workspace}&key=a")).text
        csrf = re.search(r'name="csrf" value="([^"]+)"', page).group(1)  # type: ignore[union-attr]

        async def refused(path: str, **form: str) -> httpx2.Response:
            got = await client.post(path, data={"csrf": csrf, "w": workspace, **form}, headers=ORIGIN)
            assert 400 <= got.status_code < 500, (path, got.status_code, got.text[:300])
            assert "incident" not in got.text
            return got

        got = await refused("/ui/task/release", key="a", reason="x" * 70_000)
        assert got.status_code == 413 and "reason" in got.text
        got = await refused("/ui/task/cancel", key="b", reason="y" * 70_000)
        assert got.status_code == 413
        got = await refused("/ui/messages/send", to="alice", body="z" * 9000, reply_to=asked.id)
        assert got.status_code == 413 and "8192" in got.text
        await refused("/ui/messages/send", to="alice", body="hi", reply_to="msg_nope")
        await refused("/ui/messages/ack", id="msg_nope")
        await refused("/ui/task/approve", key="a", comment="fine")  # not in review
        await refused("/ui/sessions/stop", id="no-such-session")
        await refused("/ui/thread/fork", checkpoint="ck_nope", name="x" * 300)  # not a thread's name
        await refused("/ui/thread/fork", checkpoint="ck_nope", name="fine")
    status = (await harness.tasks.list(alice, ListTasksArgs(task_key="a"))).tasks[0].status
    assert status == "claimed"
