"""The shared HTTP server: real uvicorn on a loopback port, the official client with bearer tokens."""

from __future__ import annotations

import json
import re
import secrets
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import httpx2
import pytest
import uvicorn
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import ToolFailed, call, fail, run_cli, settings_for, subprocess_env

from mcp_harness.mcp.http import build_app
from mcp_harness.service import Harness

pytestmark = pytest.mark.slow  # tokens are made with the CLI, a process of its own


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Served:
    def __init__(self, url: str, db: str) -> None:
        self.url, self.db = url, db

    def token(self, workspace: str, agent: str, role: str = "agent") -> str:
        out = run_cli("token", "create", "--db", self.db, "--workspace", workspace, "--agent", agent, "--role", role)
        assert out.returncode == 0, out.stderr
        return out.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def served(tmp_path_factory) -> Iterator[Served]:
    """A real uvicorn serving the HTTP app on a loopback port, in a thread with its own event loop."""
    db = str(tmp_path_factory.mktemp("http") / "harness.db")
    port = free_port()
    state: dict = {}

    async def main() -> None:
        settings = settings_for(db)
        async with Harness.open(settings) as harness:
            app = build_app(harness, settings, "127.0.0.1", port, ["proxy.internal", "exact.internal:8443"])
            server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
            state["server"] = server
            await server.serve()

    thread = threading.Thread(target=anyio.run, args=(main,), daemon=True)
    thread.start()
    deadline = time.time() + 20
    while time.time() < deadline:
        try:
            if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                break
        except httpx2.HTTPError:
            time.sleep(0.05)
    else:
        raise RuntimeError("the HTTP server did not start")
    yield Served(f"http://127.0.0.1:{port}", db)
    state["server"].should_exit = True
    thread.join(timeout=20)


@asynccontextmanager
async def http_client(url: str, token: str | None, **headers: str):
    if token:
        headers["Authorization"] = f"Bearer {token}"
    async with (
        httpx2.AsyncClient(headers=headers) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), read_timeout_seconds=30) as client,
    ):
        yield client


def post_initialize(url: str, **headers: str) -> httpx2.Response:
    body = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}},
    }
    headers = {"content-type": "application/json", "accept": "application/json, text/event-stream", **headers}
    return httpx2.post(f"{url}/mcp", json=body, headers=headers, timeout=10)


@pytest.mark.anyio
async def test_several_agents_share_one_server(served):
    ws = f"team-{secrets.token_hex(3)}"
    tokens = {name: served.token(ws, name) for name in ("alice", "bob", "carol")}
    async with http_client(served.url, tokens["alice"]) as alice:
        await call(alice, "add_tasks", tasks=[{"key": f"t{i}", "title": f"T{i}"} for i in range(6)])
    claimed: dict[str, list[str]] = {}

    async def work(name: str) -> None:
        async with http_client(served.url, tokens[name]) as client:
            mine = claimed.setdefault(name, [])
            while True:
                got = await call(client, "claim_task")
                if got["task"] is None:
                    return
                row = (await call(client, "list_tasks", task_key=got["task"]["key"]))["tasks"][0]
                assert row["owner"] == name  # identity comes from the token
                await call(
                    client,
                    "update_task",
                    task_key=got["task"]["key"],
                    action="complete",
                    lease_token=got["lease"]["token"],
                    verification="ok",
                )
                mine.append(got["task"]["key"])

    async with anyio.create_task_group() as tg:
        for name in tokens:
            tg.start_soon(work, name)
    done = sorted(k for keys in claimed.values() for k in keys)
    assert done == [f"t{i}" for i in range(6)]


def test_missing_bad_and_revoked_tokens_get_401(served):
    response = post_initialize(served.url)
    assert response.status_code == 401 and response.headers["www-authenticate"].startswith("Bearer")
    assert post_initialize(served.url, authorization="Bearer mcph_not-a-real-token").status_code == 401
    token = served.token("ws-revoke", "gone")
    assert post_initialize(served.url, authorization=f"Bearer {token}").status_code == 200
    out = run_cli("token", "revoke", token, "--db", served.db)
    assert out.returncode == 0 and "revoked 1 token" in out.stdout
    assert post_initialize(served.url, authorization=f"Bearer {token}").status_code == 401  # at once


def test_bad_host_and_origin_are_refused(served):
    token = served.token("ws-dns", "agent")
    auth = {"authorization": f"Bearer {token}"}
    assert post_initialize(served.url, host="evil.example:80", **auth).status_code == 421
    assert post_initialize(served.url, origin="http://evil.example", **auth).status_code == 403
    assert post_initialize(served.url, origin=served.url, **auth).status_code == 200


def test_host_checks_are_about_names_not_ports(served):
    """Loopback names on any port (a proxy or port forward in front of a loopback bind is normal);
    `--allowed-host NAME` on any port, `NAME:PORT` on exactly that port."""
    auth = {"authorization": f"Bearer {served.token('ws-hosts', 'agent')}"}
    for host in (
        "localhost:9999",
        "127.0.0.1:1",
        "[::1]:443",
        "localhost",
        "proxy.internal:4000",
        "proxy.internal",
        "exact.internal:8443",
    ):
        assert post_initialize(served.url, host=host, **auth).status_code == 200, host
    for host in ("exact.internal:9000", "exact.internal", "evil.example:8443", "localhost.evil.example:80"):
        assert post_initialize(served.url, host=host, **auth).status_code == 421, host
    assert post_initialize(served.url, host="localhost:9999", origin="http://localhost:3000", **auth).status_code == 200
    assert post_initialize(served.url, origin="http://proxy.internal:8080", **auth).status_code == 200
    assert post_initialize(served.url, origin="https://exact.internal:9000", **auth).status_code == 403


def test_healthz_reveals_nothing(served):
    response = httpx2.get(f"{served.url}/healthz", timeout=5)
    assert response.status_code == 200 and response.json() == {"status": "ok"}


@pytest.mark.anyio
async def test_reader_role_is_read_only(served):
    ws = f"ro-{secrets.token_hex(3)}"
    async with http_client(served.url, served.token(ws, "writer")) as writer:
        await call(writer, "save_checkpoint", state={"v": 1})
    async with http_client(served.url, served.token(ws, "auditor", "reader")) as reader:
        assert (await call(reader, "restore_state"))["state"] == {"v": 1}
        assert (await call(reader, "list_tasks"))["tasks"] == []
        for tool, args in (
            ("save_checkpoint", {"state": {"v": 2}}),
            ("record_progress", {"summary": "x"}),
            ("add_tasks", {"tasks": [{"key": "k", "title": "t"}]}),
            ("claim_task", {}),
        ):
            err = await fail(reader, tool, **args)
            assert err.code == "forbidden" and "reader" in err.text, err.text
        assert (await call(reader, "restore_state"))["checkpoint"]["version"] == 1


@pytest.mark.anyio
async def test_only_operator_tokens_approve_or_reject(served):
    ws = f"rv-{secrets.token_hex(3)}"
    async with http_client(served.url, served.token(ws, "coder")) as coder:
        await call(
            coder,
            "add_tasks",
            tasks=[{"key": "d", "title": "design", "review": True}, {"key": "g", "title": "sign-off", "kind": "gate"}],
        )
        got = await call(coder, "claim_task")
        await call(
            coder, "update_task", task_key="d", action="complete", lease_token=got["lease"]["token"], verification="ok"
        )
        for key, action in (("d", "approve"), ("g", "reject")):
            err = await fail(coder, "update_task", task_key=key, action=action, comment="mine")
            assert err.code == "forbidden" and "'operator' role" in err.text, err.text
    async with http_client(served.url, served.token(ws, "auditor", "reader")) as reader:
        for key, action in (("d", "approve"), ("g", "reject")):
            err = await fail(reader, "update_task", task_key=key, action=action, comment="mine")
            assert err.code == "forbidden", err.text
        rows = (await call(reader, "list_tasks"))["tasks"]
        assert [r["status"] for r in rows] == ["in_review", "in_review"]  # nothing changed
    async with http_client(served.url, served.token(ws, "ann", "operator")) as ann:
        assert (await call(ann, "update_task", task_key="d", action="approve"))["status"] == "done"
        rejected = await call(ann, "update_task", task_key="g", action="reject", comment="no")
        assert rejected["status"] == "failed"


def test_token_cli_lists_without_secrets(served):
    token = served.token("ws-list", "lister", "reader")
    served.token("ws-list", "boss", "operator")
    out = run_cli("token", "list", "--db", served.db, "--workspace", "ws-list")
    assert out.returncode == 0 and "lister" in out.stdout and "reader" in out.stdout
    assert token not in out.stdout
    head, *rows = out.stdout.splitlines()
    assert head.split() == ["ID", "WORKSPACE", "AGENT", "ROLE", "CREATED", "(UTC)", "STATE"]
    assert len({row.index("live") for row in rows}) == 1  # an operator row does not shift the columns


def test_init_url_writes_the_workspace_the_token_names(served, tmp_path):
    token = served.token("ws-team", "dev", "agent")
    project = tmp_path / "some-folder"
    project.mkdir()
    env = subprocess_env(TEAM_TOKEN=token, HOME=str(tmp_path))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_harness",
            "init",
            "--url",
            f"{served.url}/mcp",
            "--token-env",
            "TEAM_TOKEN",
            "--no-hooks",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    assert "Workspace 'ws-team' (the one the token in TEAM_TOKEN names" in out.stdout
    assert "workspace `ws-team`" in (project / "AGENTS.md").read_text() and "Workspace 'some-folder'" not in out.stdout
    env["TEAM_TOKEN"] = "mcph_not-a-real-token"
    refused = subprocess.run(
        [
            sys.executable,
            "-m",
            "mcp_harness",
            "init",
            "--url",
            f"{served.url}/mcp",
            "--token-env",
            "TEAM_TOKEN",
            "--force",
        ],
        cwd=project,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert refused.returncode == 2 and "refused the token in TEAM_TOKEN" in refused.stderr


def test_hooks_over_http_give_the_brief_and_write_notes_as_the_token(served, tmp_path):
    token = served.token("ws-hooks", "dev", "agent")
    env = subprocess_env(TEAM_TOKEN=token, XDG_RUNTIME_DIR=str(tmp_path))

    def hook(event: str, **fields: str) -> subprocess.CompletedProcess:
        data = json.dumps({"session_id": "s1", "hook_event_name": event, **fields})
        return subprocess.run(
            [
                sys.executable,
                "-m",
                "mcp_harness",
                "hook",
                event,
                "--url",
                f"{served.url}/mcp",
                "--token-env",
                "TEAM_TOKEN",
            ],
            input=data,
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )

    start = hook("SessionStart", source="startup")
    assert start.stderr == "" and json.loads(start.stdout)["hookSpecificOutput"]["additionalContext"].startswith(
        f"mcp-harness: this session acts as the agent of the token in TEAM_TOKEN on {served.url}/mcp"
    )
    assert hook("UserPromptSubmit", prompt="hi").stdout == ""  # no database to look at: quiet
    for event, field in (("PreCompact", {"trigger": "auto"}), ("StopFailure", {"error": "rate_limit"})):
        quiet = hook(event, **field)
        assert (quiet.stdout, quiet.stderr) == ("", ""), event
    done = hook("SessionEnd", reason="logout")
    assert done.stdout == "" and done.stderr == ""
    deadline = time.monotonic() + 30  # a writing hook leaves the write to a process of its own
    while "(logout)" not in (shown := run_cli("log", "--db", served.db, "--workspace", "ws-hooks")).stdout:
        assert time.monotonic() < deadline, shown.stdout
        time.sleep(0.2)
    assert "hook: its context was compacted" in shown.stdout and "hook: its session ended (logout)" in shown.stdout
    assert "dev" in shown.stdout  # written as the token's agent


def test_exposed_bind_without_tokens_is_refused(tmp_path: Path):
    out = run_cli(
        "serve",
        "--transport",
        "http",
        "--host",
        "0.0.0.0",
        "--port",
        str(free_port()),
        "--db",
        str(tmp_path / "empty.db"),
        env=subprocess_env(),
    )
    assert out.returncode != 0
    assert "refusing to listen on 0.0.0.0: no token exists" in out.stderr
    assert len(out.stderr.strip().splitlines()) == 1


# -- isolation: whatever the arguments say, workspace A never sees or changes workspace B ---------------

OPS = st.lists(
    st.tuples(st.sampled_from(["A", "B"]), st.sampled_from(["save", "progress", "task", "claim", "peek"])),
    min_size=4,
    max_size=12,
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_workspaces_are_isolated(served, ops):
    ws = {side: f"iso-{side}-{secrets.token_hex(4)}" for side in "AB"}
    tokens = {side: served.token(ws[side], f"agent-{side}") for side in "AB"}

    async def scenario() -> None:
        made: dict[str, dict[str, list]] = {s: {"ck": [], "tasks": [], "entries": []} for s in "AB"}
        async with http_client(served.url, tokens["A"]) as a, http_client(served.url, tokens["B"]) as b:
            clients = {"A": a, "B": b}
            for side, op in ops:
                c, other = clients[side], "B" if side == "A" else "A"
                if op == "save":
                    out = await call(c, "save_checkpoint", state={"owner": side}, thread="shared")
                    made[side]["ck"].append(out["checkpoint_id"])
                elif op == "progress":
                    made[side]["entries"].append((await call(c, "record_progress", summary=f"by {side}"))["entry_id"])
                elif op == "task":
                    key = f"{side}-{len(made[side]['tasks'])}"
                    await call(c, "add_tasks", tasks=[{"key": key, "title": f"of {side}"}])
                    made[side]["tasks"].append(key)
                elif op == "claim":
                    got = await call(c, "claim_task")
                    assert got["task"] is None or got["task"]["key"].startswith(f"{side}-")
                else:  # peek: address the other side's things by id and key
                    for ck in made[other]["ck"]:
                        assert (await fail(c, "restore_state", thread="shared", checkpoint_id=ck)).code == "not_found"
                    for key in made[other]["tasks"]:
                        assert (await fail(c, "claim_task", task_key=key)).code == "not_found"
                        err = await fail(c, "update_task", task_key=key, action="reopen", reason="x")
                        assert err.code == "not_found"
            for side, c in clients.items():
                brief = await call(c, "restore_state", thread="shared", progress_limit=100)
                if made[side]["ck"]:
                    assert brief["state"] == {"owner": side}
                    assert brief["checkpoint"]["version"] == len(made[side]["ck"])
                else:
                    assert brief["found"] is False
                listed = [r["key"] for r in (await call(c, "list_tasks", limit=500))["tasks"]]
                assert listed == made[side]["tasks"]
                progress = await c.read_resource("harness://progress")
                assert (
                    "by A" not in progress.contents[0].text if side == "B" else "by B" not in progress.contents[0].text
                )

    try:
        anyio.run(scenario)
    except* ToolFailed as group:
        raise group.exceptions[0] from None


@pytest.mark.anyio
async def test_brief_from_a_shared_server(served):
    """`brief --url URL --token-env VAR`: the official client asks the server as the token's agent."""
    token = served.token("ws-brief", "remote-coder")
    async with http_client(served.url, token) as client:
        await call(client, "add_tasks", tasks=[{"key": "t1", "title": "First task"}])
        await call(client, "claim_task")
        await call(client, "record_progress", summary="remote progress", task_key="t1")
    # another agent holds src/ (declared with its task): the ready task under it is marked, last
    async with http_client(served.url, served.token("ws-brief", "remote-other")) as other:
        await call(
            other,
            "add_tasks",
            tasks=[
                {"key": "src", "title": "Src", "paths": ["src/"], "priority": 9},
                {"key": "src-x", "title": "Src x", "paths": ["src/x.py"]},
                {"key": "docs", "title": "Docs", "paths": ["docs/"]},
            ],
        )
        await call(other, "claim_task", task_key="src")
    env = subprocess_env(TEAM_TOKEN=token)
    out = run_cli("brief", "--url", f"{served.url}/mcp", "--token-env", "TEAM_TOKEN", env=env)
    assert out.returncode == 0, out.stderr
    assert f"shared server {served.url}/mcp" in out.stdout and "remote progress" in out.stdout
    assert 'You hold: t1 "First task"' in out.stdout and token not in out.stdout
    assert 'Ready to claim: docs "Docs"; src-x "Src x" (paths held by remote-other)' in out.stdout, out.stdout
    unset = run_cli("brief", "--url", f"{served.url}/mcp", "--token-env", "NOT_SET_ANYWHERE")
    assert unset.returncode != 0 and "NOT_SET_ANYWHERE is not set" in unset.stderr
    refused = run_cli("brief", "--url", f"{served.url}/mcp", "--token-env", "T", env=subprocess_env(T="mcph_bad"))
    assert refused.returncode != 0 and "was refused (HTTP 401" in refused.stderr
    assert len(refused.stderr.strip().splitlines()) == 1


@pytest.mark.anyio
async def test_a_waiting_claim_whose_client_disconnected_claims_nothing(served):
    """A client that drops its connection while its claim waits is gone: a task added afterwards stays
    pending (no lease for nobody, no attempt used). The SDK cancels the request's handler when its
    client disconnects (the 2025 wire and the 2026 one alike), which ends the wait before any claim;
    a client that stays gets the task (see the stdio test for the same rule at the end of stdin)."""
    protocol = "2025-11-25"
    workspace = f"ws-{secrets.token_hex(4)}"
    token = served.token(workspace, "departed")
    body = {
        "jsonrpc": "2.0",
        "id": 7,
        "method": "tools/call",
        "params": {"name": "claim_task", "arguments": {"wait_seconds": 30}},
    }
    headers = {
        "authorization": f"Bearer {token}",
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": protocol,
    }
    async with httpx2.AsyncClient(timeout=60) as http:
        with anyio.move_on_after(1.5):
            async with http.stream("POST", f"{served.url}/mcp", json=body, headers=headers) as response:
                assert response.status_code == 200
                async for _ in response.aiter_bytes():
                    pass
    async with http_client(served.url, served.token(workspace, "planner")) as client:
        await call(client, "add_tasks", tasks=[{"key": "late", "title": "added after the client left"}])
        await anyio.sleep(1.5)
        row = (await call(client, "list_tasks"))["tasks"][0]
    assert (row["status"], row.get("owner"), row.get("attempts", 0)) == ("pending", None, 0)  # defaults left out


@pytest.mark.anyio
async def test_instructions_follow_the_token_role(served):
    from mcp_harness.mcp.server import INSTRUCTIONS

    for role in ("agent", "reader", "operator"):
        async with http_client(served.url, served.token(f"in-{role}", "who", role)) as client:
            assert client.instructions == INSTRUCTIONS[role], role


def test_an_unpaired_surrogate_in_an_argument_is_a_tool_error(served):
    """Valid JSON text, not valid Unicode: the SDK's parser refuses the whole request; the tool names the
    argument instead (issue 25, item 7). Without a token it is still a 401."""
    body = (
        b'{"jsonrpc": "2.0", "id": 7, "method": "tools/call", "params": {"name": "list_tasks", '
        b'"arguments": {"tag": "main\\ud8ac"}}}'
    )
    headers = {
        "content-type": "application/json",
        "accept": "application/json, text/event-stream",
        "mcp-protocol-version": "2025-06-18",
    }
    assert httpx2.post(f"{served.url}/mcp", content=body, headers=headers, timeout=10).status_code == 401
    headers["authorization"] = f"Bearer {served.token('surrogates', 'a')}"
    response = httpx2.post(f"{served.url}/mcp", content=body, headers=headers, timeout=10)
    assert response.status_code == 200, response.text
    events = [line.removeprefix("data:").strip() for line in response.text.splitlines() if line.startswith("data:")]
    answer = json.loads(events[-1]) if events else response.json()
    assert answer["id"] == 7 and answer["result"]["isError"] is True, answer
    assert answer["result"]["content"][0]["text"].startswith("[invalid_argument] tag: not valid Unicode"), answer


def test_the_readme_script_connects_with_a_token_and_records_as_documented(served):
    """The shared server page's Python snippet runs as written against a real server (its URL pointed at this one):
    it claims, records progress with `next_steps` as a list and `artifacts` as an object, and completes."""
    page = (Path(__file__).resolve().parent.parent / "docs" / "http.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", page, flags=re.S)
    assert len(blocks) == 1, "docs/http.md shows one Python script"
    script = blocks[0].replace("http://127.0.0.1:8765", served.url)
    ws = f"script-{secrets.token_hex(3)}"
    token = served.token(ws, "bot")

    async def plan() -> None:
        async with http_client(served.url, token) as client:
            await call(client, "add_tasks", tasks=[{"key": "api", "title": "API"}])

    anyio.run(plan)
    ran = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        timeout=60,
        env=subprocess_env(HARNESS_TOKEN=token),
    )
    assert ran.returncode == 0 and "'status': 'done'" in ran.stdout, (ran.stdout, ran.stderr)

    async def check() -> dict:
        async with http_client(served.url, token) as client:
            return await call(client, "restore_state", progress_limit=1)

    entry = anyio.run(check)["recent_progress"][0]
    assert entry["task_key"] == "api" and entry["agent"] == "bot"
    assert entry["next_steps"] == ["wire it into the UI"]
    assert entry["artifacts"] == {"files": ["src/api.py"], "commit": "bbe720c"}
