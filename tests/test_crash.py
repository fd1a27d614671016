"""Processes killed mid-write: nothing acknowledged is lost, the file stays sound, work finishes.

When to kill is random: each test prints its seed, and `MCP_HARNESS_TEST_SEED=N` repeats the same
choices (what the processes managed to do before each kill still depends on timing)."""

from __future__ import annotations

import os
import random
import secrets
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import anyio
import pytest
from mcp import Client, StdioServerParameters
from mcp.shared.exceptions import MCPError
from mcp_types import CONNECTION_CLOSED
from support import call, subprocess_env

HELPERS = Path(__file__).resolve().parent / "helpers"
pytestmark = pytest.mark.slow


@pytest.fixture
def rng() -> random.Random:
    seed = int(os.environ.get("MCP_HARNESS_TEST_SEED") or secrets.randbits(32))
    print(f"random seed {seed} (MCP_HARNESS_TEST_SEED={seed} repeats it)")
    return random.Random(seed)


def connection_closed(exc: BaseException) -> bool:
    """What a client legitimately sees when its server is killed: the SDK fails every call in flight
    or sent afterwards with CONNECTION_CLOSED. Anything else (a tool error included) is a finding."""
    return isinstance(exc, MCPError) and exc.code == CONNECTION_CLOSED


def killable_server(db: str, workspace: str, agent: str, pidfile: Path) -> Client:
    """`mcp-harness serve` through an exec wrapper that records the server's own PID."""
    launcher = (
        "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
        "os.execv(sys.executable, [sys.executable, '-m', 'mcp_harness', *sys.argv[2:]])"
    )
    args = ["-c", launcher, str(pidfile), "serve", "--db", db, "--workspace", workspace, "--agent", agent]
    return Client(
        StdioServerParameters(command=sys.executable, args=args, env=subprocess_env()), read_timeout_seconds=30
    )


@pytest.mark.anyio
async def test_server_sigkilled_while_clients_write(tmp_path, rng):
    """10 rounds: SIGKILL the server mid-stream; every acknowledged write is there afterwards."""
    db = str(tmp_path / "crash.db")
    pidfile = tmp_path / "server.pid"
    acked_versions: list[int] = []
    acked_entries: set[int] = set()
    acked_done: set[str] = set()
    for round_no in range(10):
        try:
            async with killable_server(db, "crash", "writer", pidfile) as client:
                writing = anyio.Event()  # the server opens its database after the handshake: time the kill from there

                async def writer(round_no: int = round_no, writing: anyio.Event = writing) -> None:
                    i = 0
                    while True:
                        i += 1
                        saved = await call(
                            client,
                            "save_checkpoint",
                            mode="merge",
                            state={"round": round_no, f"k{i % 7}": "v" * (i % 50)},
                        )
                        acked_versions.append(saved["version"])
                        writing.set()
                        entry = await call(client, "record_progress", summary=f"round {round_no} step {i}")
                        acked_entries.add(entry["seq"])
                        key = f"r{round_no}-{i}"
                        await call(client, "add_tasks", tasks=[{"key": key, "title": key}])
                        got = await call(client, "claim_task", task_key=key)
                        await call(
                            client,
                            "update_task",
                            task_key=key,
                            action="complete",
                            lease_token=got["lease"]["token"],
                            verification="ok",
                        )
                        acked_done.add(key)

                async with anyio.create_task_group() as tg:
                    tg.start_soon(writer)
                    await writing.wait()
                    await anyio.sleep(rng.uniform(0.3, 0.8))
                    os.kill(int(pidfile.read_text()), signal.SIGKILL)
        except* MCPError as group:
            _closed, other = group.split(connection_closed)  # the connection dies with the server
            if other is not None:
                raise other from None
    assert len(acked_versions) > 20, "the rounds should have written something before each kill"

    async with killable_server(db, "crash", "auditor", pidfile) as client:
        history = await call(client, "list_checkpoints", limit=200)
        versions = {c["version"] for c in history["checkpoints"]}
        page = history
        while page["next_before_version"]:
            page = await call(client, "list_checkpoints", limit=200, before_version=page["next_before_version"])
            versions |= {c["version"] for c in page["checkpoints"]}
        assert set(acked_versions) <= versions, "an acknowledged checkpoint was lost"
        assert sorted(versions) == list(range(1, max(versions) + 1)), "versions have no holes"
        log = await call(client, "restore_state", progress_limit=100)
        listed = {e["seq"] for e in log["recent_progress"]}
        tasks: dict[str, str] = {}
        listing = {"next_cursor": None}
        while True:
            args = {
                "limit": 500,
                "status": ["done", "pending", "claimed", "failed", "blocked"],
                **({"cursor": listing["next_cursor"]} if listing["next_cursor"] else {}),
            }
            listing = await call(client, "list_tasks", **args)
            tasks.update({r["key"]: r["status"] for r in listing["tasks"]})
            if listing["next_cursor"] is None:
                break
        assert all(tasks.get(k) == "done" for k in acked_done), "an acknowledged completion was lost"
        assert await call(client, "save_checkpoint", state={"after": "crashes"})  # it restarts and serves
    with sqlite3.connect(db) as raw:
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        stored = {row[0] for row in raw.execute("SELECT seq FROM progress")}
    assert acked_entries <= stored, "an acknowledged progress entry was lost"
    assert listed <= stored


def test_agents_killed_and_restarted_finish_every_task_once(tmp_path, rng):
    """8 agent processes drain 160 tasks while being SIGKILLed at random and started again."""
    db, log = str(tmp_path / "agents.db"), tmp_path / "completions.log"
    log.touch()
    tasks = 160
    seed = subprocess.run(
        [
            sys.executable,
            "-c",
            "import anyio,sys\nfrom mcp_harness.config import Settings\nfrom mcp_harness.models import TaskSpec\n"
            "from mcp_harness.arguments import AddTasksArgs\n"
            "from mcp_harness.service import Harness, Identity\n"
            "async def m():\n"
            "    async with Harness.open(Settings.from_env(sys.argv[1])) as h:\n"
            f"        await h.tasks.add(Identity('team','planner'), AddTasksArgs(tasks=[TaskSpec(key=f't{{i:03d}}', "
            f"title='x') for i in range({tasks})]))\n"
            "anyio.run(m)",
            db,
        ],
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert seed.returncode == 0, seed.stderr

    def start(agent: str) -> subprocess.Popen:
        return subprocess.Popen(
            [sys.executable, str(HELPERS / "agent_worker.py"), db, "team", agent, str(log)],
            env=subprocess_env(),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )

    agents = {f"agent-{i}": start(f"agent-{i}") for i in range(8)}
    kills, deadline = 0, time.time() + 240
    while time.time() < deadline:
        time.sleep(rng.uniform(0.3, 0.7))
        running = [name for name, proc in agents.items() if proc.poll() is None]
        if not running:
            break
        if kills < 12:
            victim = rng.choice(running)
            os.killpg(agents[victim].pid, signal.SIGKILL)  # the agent and its server together
            agents[victim].wait()
            kills += 1
            agents[victim] = start(victim)
    for proc in agents.values():
        proc.wait(timeout=max(1, deadline - time.time()))
    assert kills >= 8

    completions = Counter(line.split()[0] for line in log.read_text().splitlines())
    assert max(completions.values()) == 1, "a task had two accepted completions"
    with sqlite3.connect(db) as raw:
        statuses = Counter(status for (status,) in raw.execute("SELECT status FROM tasks"))
        assert raw.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert statuses == {"done": tasks}, statuses
