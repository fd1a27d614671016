"""What the console's tests share: a real shared HTTP server in a thread, `mcp-harness ui` as a real
process, seeding a workspace, and tool calls by agents in processes of their own."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import anyio
import httpx2
import uvicorn

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, RecordProgressArgs, UpdateTaskArgs
from mcp_harness.mcp.http import build_app
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity
from support import run_cli, settings_for, subprocess_env

HELPER = Path(__file__).parent.parent / "helpers" / "agent_call.py"  # tests/helpers
XSS_TITLE = '<script>window.pwned = 1</script><img src=x onerror="window.pwned = 2"> sneaky title'


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@contextmanager
def shared_server(
    db: str, *, bind_as: str = "127.0.0.1", allowed_hosts: list[str] | None = None, **overrides: object
) -> Iterator[str]:
    """`serve --transport http`'s app on a loopback port (built as if bound to `bind_as`, answering the
    `allowed_hosts` names too, with these settings `overrides`); its URL."""
    port = free_port()
    state: dict = {}

    async def main() -> None:
        settings = settings_for(db, **overrides)
        async with Harness.open(settings) as harness:
            app = build_app(harness, settings, bind_as, port, allowed_hosts or [])
            config = uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning", timeout_graceful_shutdown=1)
            state["server"] = uvicorn.Server(config)
            await state["server"].serve()

    thread = threading.Thread(target=anyio.run, args=(main,), daemon=True)
    thread.start()
    url = f"http://127.0.0.1:{port}"
    deadline = time.time() + 30
    while time.time() < deadline:
        try:
            if httpx2.get(f"{url}/healthz", headers={"host": f"{bind_as}:{port}"}, timeout=1).status_code == 200:
                break
        except httpx2.HTTPError:
            time.sleep(0.05)
    else:
        raise RuntimeError("the HTTP server did not start")
    try:
        yield url
    finally:
        state["server"].should_exit = True
        thread.join(timeout=20)


@contextmanager
def ui_process(db: str, *args: str) -> Iterator[tuple[str, subprocess.Popen]]:
    """`mcp-harness ui` as a real process; the URL it printed alone on its last line of stdout."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_harness", "ui", "--db", db, "--port", "0", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=subprocess_env(),
    )
    try:
        lines = []
        deadline = time.time() + 60
        while time.time() < deadline:
            line = proc.stdout.readline()
            if not line:
                raise RuntimeError(f"mcp-harness ui exited: {proc.stderr.read()}")
            lines.append(line.rstrip("\n"))
            if line.startswith("http://"):
                break
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/ui/login\?code=[\w-]+", lines[-1]), lines
        yield lines[-1], proc
    finally:
        proc.terminate()
        proc.wait(timeout=20)


def token(db: str, workspace: str, agent: str, role: str) -> str:
    out = run_cli("token", "create", "--db", db, "--workspace", workspace, "--agent", agent, "--role", role)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


def seed(db: str, workspace: str) -> None:
    """A small plan: one task done, one failed, one claimed, a few pending (one with a hostile title)."""

    async def main() -> None:
        async with Harness.open(settings_for(db)) as h:
            alice, bob = Identity(workspace, "alice"), Identity(workspace, "bob")
            await h.tasks.add(
                alice,
                AddTasksArgs(
                    tasks=[
                        TaskSpec(
                            key="schema",
                            title="Design the database schema for orders",
                            priority=5,
                            tags=["db"],
                            steps=["migration runs on an empty database", "ERD committed under docs/"],
                        ),
                        TaskSpec(key="api", title="REST endpoints for orders", depends_on=["schema"], priority=3),
                        TaskSpec(key="payments", title="Payment capture with idempotency keys", depends_on=["schema"]),
                        TaskSpec(key="cart", title="Cart page: add, remove, change quantities", depends_on=["api"]),
                        TaskSpec(key="ci", title="Fix the flaky CI job on the ARM runner", max_attempts=1),
                        TaskSpec(
                            key="deploy", title="Deploy to staging behind a feature flag", depends_on=["ci", "cart"]
                        ),
                        TaskSpec(key="xss", title=XSS_TITLE),
                    ]
                ),
            )
            got = await h.tasks.claim(alice, ClaimTaskArgs(task_key="schema"))
            await h.tasks.update(
                alice,
                UpdateTaskArgs(
                    task_key="schema",
                    action="complete",
                    lease_token=got.lease.token,
                    verification="migration ran on an empty database",
                ),
            )
            await h.progress.record(
                alice,
                RecordProgressArgs(
                    summary="Schema done: orders, lines, payments",
                    status="done",
                    task_key="schema",
                    next_steps=["api can start"],
                ),
            )
            got = await h.tasks.claim(bob, ClaimTaskArgs(task_key="ci"))
            await h.tasks.update(
                bob,
                UpdateTaskArgs(
                    task_key="ci",
                    action="fail",
                    lease_token=got.lease.token,
                    retry=False,
                    error="the ARM runner image lacks libssl3",
                ),
            )
            await h.tasks.claim(alice, ClaimTaskArgs(task_key="api", lease_seconds=1800))
            await h.progress.record(
                alice, RecordProgressArgs(summary="Started the orders endpoints", status="in_progress", task_key="api")
            )

    anyio.run(main)


def _agent_process(db: str, workspace: str, agent: str, tool: str, arguments: dict) -> subprocess.CompletedProcess:
    """A tool call by an agent in another process (the real server, the official client)."""
    return subprocess.run(
        [sys.executable, str(HELPER), db, workspace, agent, tool, json.dumps(arguments)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=120,
    )


def agent_call(db: str, workspace: str, agent: str, tool: str, **arguments: object) -> dict:
    """The structured result of a tool call that must succeed."""
    out = _agent_process(db, workspace, agent, tool, arguments)
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


def agent_call_error(db: str, workspace: str, agent: str, tool: str, **arguments: object) -> str:
    """The error text of a tool call that must fail (`[code] message`)."""
    out = _agent_process(db, workspace, agent, tool, arguments)
    assert out.returncode != 0, out.stdout
    return out.stderr.strip()


def tasks_json(db: str, workspace: str) -> dict[str, dict]:
    """What the database says, through the CLI (another process)."""
    out = run_cli("tasks", "--db", db, "--workspace", workspace, "--json")
    assert out.returncode == 0, out.stderr
    return {t["key"]: t for t in json.loads(out.stdout)["tasks"]}


def log_json(db: str, workspace: str) -> list[dict]:
    out = run_cli("log", "--db", db, "--workspace", workspace, "--json")
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout)


@contextmanager
def signed_in(url: str, tok: str) -> Iterator[httpx2.Client]:
    """A browser-like client signed in to the shared server's console with the bearer token `tok`."""
    with httpx2.Client(base_url=url, follow_redirects=False, timeout=30) as client:
        response = client.post("/ui/login", data={"token": tok}, headers={"origin": url})
        assert response.status_code == 303, response.text
        yield client
