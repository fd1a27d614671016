"""Scale-out on PostgreSQL: three `mcp-harness serve --transport http` processes, sixteen agents."""

from __future__ import annotations

import secrets
import subprocess
import sys
import time
from collections import Counter
from contextlib import asynccontextmanager

import anyio
import httpx2
import pytest
from mcp import Client
from mcp.client.streamable_http import streamable_http_client
from support import call, drain, run_cli, subprocess_env
from test_http import free_port

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # every test here starts processes

SERVERS, AGENTS, TASKS = 3, 16, 2000


@asynccontextmanager
async def agent_client(url: str, token: str):
    async with (
        httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), read_timeout_seconds=60) as client,
    ):
        yield client


@pytest.fixture
def http_servers(postgres_url):
    ports = [free_port() for _ in range(SERVERS)]
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                "-m",
                "mcp_harness",
                "serve",
                "--transport",
                "http",
                "--port",
                str(port),
                "--db",
                postgres_url,
            ],
            env=subprocess_env(MCP_HARNESS_DB_POOL_SIZE="4"),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        for port in ports
    ]
    urls = [f"http://127.0.0.1:{port}" for port in ports]
    try:
        for url in urls:
            deadline = time.time() + 30
            while True:
                try:
                    if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                        break
                except httpx2.HTTPError:
                    pass
                assert time.time() < deadline, "an HTTP server did not start"
                time.sleep(0.1)
        yield urls
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=20)
            proc.stderr.close()


async def test_three_servers_sixteen_agents_two_thousand_tasks(postgres_url, http_servers):
    ws = f"scale-{secrets.token_hex(3)}"
    tokens = []
    for i in range(AGENTS):
        out = run_cli("token", "create", "--db", postgres_url, "--workspace", ws, "--agent", f"agent-{i}")
        assert out.returncode == 0, out.stderr
        tokens.append(out.stdout.strip().splitlines()[-1])

    async with agent_client(http_servers[0], tokens[0]) as planner:
        for start in range(0, TASKS, 500):
            await call(
                planner,
                "add_tasks",
                tasks=[{"key": f"t{i:05d}", "title": f"task {i}"} for i in range(start, start + 500)],
            )
        saved = await call(planner, "save_checkpoint", state={"plan": "scale", "tasks": TASKS}, label="plan")

    accepted: Counter[str] = Counter()
    errors: list[str] = []

    async def agent(i: int) -> None:
        async with agent_client(http_servers[i % SERVERS], tokens[i]) as client:
            await drain(client, f"agent-{i}", accepted, errors, lease_seconds=600, idle=0.05)

    with anyio.fail_after(600):
        async with anyio.create_task_group() as tg:
            for i in range(AGENTS):
                tg.start_soon(agent, i)

    assert errors == [], errors[:5]
    assert len(accepted) == TASKS and max(accepted.values()) == 1
    # A checkpoint saved through server 0 is restored through servers 1 and 2.
    for url, token in ((http_servers[1], tokens[1]), (http_servers[2], tokens[2])):
        async with agent_client(url, token) as client:
            brief = await call(client, "restore_state", label="plan")
            assert brief["checkpoint"]["checkpoint_id"] == saved["checkpoint_id"]
            assert brief["state"] == {"plan": "scale", "tasks": TASKS}
            assert brief["task_counts"]["done"] == TASKS
