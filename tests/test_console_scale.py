"""The console at a size that used to stall the server: a board of 5,100 tasks (100 roots that 5,000
tasks each wait on) over real HTTP. Every page and fragment stays well under 2 MB, lists come in
pages, and an agent's call in another workspace is answered while pages of that board render."""

from __future__ import annotations

import secrets
import threading
import time
from collections.abc import Iterator

import anyio
import httpx2
import pytest
from support import settings_for
from support.console import shared_server, token

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.slow

ROOTS, DEPENDENTS = 100, 5000
LIMIT = 2_000_000  #: bytes a page may have at most (the issue's "well under 2 MB")


def build(db: str, workspace: str) -> None:
    """100 roots and 5,000 tasks that each wait on all of them: six add_tasks calls."""

    async def main() -> None:
        async with Harness.open(settings_for(db)) as h:
            me = Identity(workspace, "planner")
            roots = [f"root-{i:03}" for i in range(ROOTS)]
            await h.tasks.add(me, AddTasksArgs(tasks=[TaskSpec(key=k, title=f"Foundation {k}") for k in roots]))
            for start in range(0, DEPENDENTS, 1000):
                await h.tasks.add(
                    me,
                    AddTasksArgs(
                        tasks=[
                            TaskSpec(
                                key=f"leaf-{i:04}", title=f"Feature {i} that needs every foundation", depends_on=roots
                            )
                            for i in range(start, start + 1000)
                        ]
                    ),
                )
            for _ in range(3):  # a few events and progress on one root
                got = await h.tasks.claim(me, ClaimTaskArgs(task_key="root-000"))
                await h.tasks.update(
                    me, UpdateTaskArgs(task_key="root-000", action="release", lease_token=got.lease.token)
                )

    anyio.run(main)


@pytest.fixture(scope="module")
def big() -> Iterator[tuple[str, str, str]]:
    """A shared server over a database holding the big board; its URL, the database and the workspace."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        db = f"{tmp}/big.db"
        build(db, "big")
        with shared_server(db) as url:
            yield url, db, "big"


def signed_in(url: str, tok: str) -> httpx2.Client:
    client = httpx2.Client(base_url=url, follow_redirects=False, timeout=60)
    response = client.post("/ui/login", data={"token": tok}, headers={"origin": url})
    assert response.status_code == 303, response.text
    return client


def test_every_page_of_a_5100_task_board_stays_well_under_2_mb(big: tuple[str, str, str]):
    url, db, ws = big
    client = signed_in(url, token(db, ws, "olga", "reader"))
    try:
        pages = {
            "board": f"/ui/board?w={ws}",
            "board, live refresh": f"/ui/board?w={ws}",
            "one column": f"/ui/board?w={ws}&col=blocked",
            "pending column, page 2": f"/ui/board?w={ws}&col=pending&offset=200",
            "a root's page": f"/ui/task?w={ws}&key=root-000",
            "a root's dependents, page 3": f"/ui/task?w={ws}&key=root-000&needed=200",
            "a leaf's page": f"/ui/task?w={ws}&key=leaf-4999",
            "graph": f"/ui/graph?w={ws}",
            "timeline": f"/ui/log?w={ws}",
            "agents": f"/ui/agents?w={ws}",
            "needs": f"/ui/needs?w={ws}",
        }
        sizes = {}
        for name, path in pages.items():
            headers = {"hx-request": "true"} if "live" in name else {}
            response = client.get(path, headers=headers)
            assert response.status_code == 200, (name, response.text[:300])
            sizes[name] = len(response.content)
        assert max(sizes.values()) < LIMIT, sizes
        board = client.get(pages["board"]).text
        assert "5050 more" in board, "the pending column pages on"
        later = client.get(pages["pending column, page 2"]).text
        assert "and 96 more" in later and "leaf-0100" in later  # a card names 4 of its 100 open dependencies
        root = client.get(pages["a root's page"]).text
        assert "1–100 of 5000" in root and "needed=100" in root  # its 5,000 dependents come in pages
        page3 = client.get(pages["a root's dependents, page 3"]).text
        assert "201–300 of 5000" in page3 and "leaf-0200" in page3 and "leaf-0199" not in page3
    finally:
        client.close()


def test_an_agent_in_another_workspace_is_answered_while_big_pages_render(big: tuple[str, str, str]):
    url, db, ws = big
    stop = threading.Event()
    rendered: list[int] = []

    def keep_fetching(client: httpx2.Client) -> None:
        while not stop.is_set():
            rendered.append(len(client.get(f"/ui/board?w={ws}").content))

    clients = [signed_in(url, token(db, ws, f"tab{i}", "reader")) for i in range(4)]
    workers = [threading.Thread(target=keep_fetching, args=(c,)) for c in clients]
    for w in workers:
        w.start()
    try:
        other = f"other-{secrets.token_hex(3)}"
        headers = {
            "authorization": f"Bearer {token(db, other, 'ada', 'agent')}",
            "host": url.split("//")[1],
            "accept": "application/json, text/event-stream",
            "content-type": "application/json",
        }
        took = []
        with httpx2.Client(base_url=url, timeout=60) as mcp:
            hello = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}
            init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": hello}
            response = mcp.post("/mcp", json=init, headers=headers)
            assert response.status_code == 200, response.text
            session = response.headers.get("mcp-session-id")
            if session:
                headers["mcp-session-id"] = session
            mcp.post("/mcp", json={"jsonrpc": "2.0", "method": "notifications/initialized"}, headers=headers)
            for i in range(6):
                call = {
                    "jsonrpc": "2.0",
                    "id": 10 + i,
                    "method": "tools/call",
                    "params": {"name": "record_progress", "arguments": {"summary": f"step {i}"}},
                }
                started = time.perf_counter()
                response = mcp.post("/mcp", json=call, headers=headers)
                took.append(time.perf_counter() - started)
                assert response.status_code == 200 and '"isError":true' not in response.text, response.text
                time.sleep(0.2)
        assert len(rendered) >= 4, "the pages were rendering meanwhile"
        # Before pages rendered off the event loop, such a call waited for whole pages (7.6 s in the issue).
        assert max(took) < 1.5, took
    finally:
        stop.set()
        for w in workers:
            w.join(timeout=120)
        for c in clients:
            c.close()
