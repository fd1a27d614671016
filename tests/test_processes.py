"""Concurrency with real processes: several `mcp-harness serve` over stdio on one database."""

from __future__ import annotations

import random
from collections import Counter

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support import call, drain, serve_command, subprocess_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # every test here starts processes


def stdio_client(url: str, workspace: str, agent: str) -> Client:
    cmd = serve_command(url, workspace, agent)
    return Client(StdioServerParameters(command=cmd[0], args=cmd[1:], env=subprocess_env()), read_timeout_seconds=120)


async def drain_with_processes(
    url: str, workspace: str, agents: list[str], tasks: int
) -> tuple[Counter, list[str], dict]:
    """Each agent has its own server process; all claim and complete until the list is done."""
    accepted: Counter[str] = Counter()
    errors: list[str] = []
    async with stdio_client(url, workspace, "planner") as planner:
        for start in range(0, tasks, 250):
            specs = [
                {"key": f"t{i:04d}", "title": f"task {i}", "priority": random.randint(0, 3)}
                for i in range(start, min(tasks, start + 250))
            ]
            await call(planner, "add_tasks", tasks=specs)

    async def worker(agent: str) -> None:
        async with stdio_client(url, workspace, agent) as client:
            await drain(client, agent, accepted, errors)

    with anyio.fail_after(300):
        async with anyio.create_task_group() as tg:
            for agent in agents:
                tg.start_soon(worker, agent)
        async with stdio_client(url, workspace, "auditor") as auditor:
            counts = (await call(auditor, "list_tasks", limit=1))["counts"]
    return accepted, errors, counts


async def test_eight_server_processes_drain_500_tasks(sqlite_url, workspace):
    accepted, errors, counts = await drain_with_processes(sqlite_url, workspace, [f"worker-{i}" for i in range(8)], 500)
    assert errors == [], errors[:5]
    assert len(accepted) == 500, f"{500 - len(accepted)} tasks never completed"
    assert max(accepted.values()) == 1, "a task had two accepted completions"
    assert counts == {"done": 500}  # zero buckets omitted


async def test_progress_seq_is_unique_and_ordered_across_processes(sqlite_url, workspace):
    seqs: list[int] = []

    async def writer(agent: str) -> None:
        async with stdio_client(sqlite_url, workspace, agent) as client:
            for i in range(20):
                seqs.append((await call(client, "record_progress", summary=f"{agent} {i}"))["seq"])

    async with anyio.create_task_group() as tg:
        for i in range(4):
            tg.start_soon(writer, f"w{i}")
    assert len(seqs) == 80 and len(set(seqs)) == 80
    async with stdio_client(sqlite_url, workspace, "reader") as reader:
        log = (await call(reader, "restore_state", progress_limit=100))["recent_progress"]
    listed = [e["seq"] for e in log]
    assert listed == sorted(listed, reverse=True) and set(listed) == set(seqs)


async def test_wait_seconds_is_woken_by_another_server_process(sqlite_url, workspace):
    """A long-polling claim in one process wakes soon after another process adds a task."""
    async with (
        stdio_client(sqlite_url, workspace, "waiter") as waiter,
        stdio_client(sqlite_url, workspace, "producer") as producer,
    ):
        result: dict = {}
        for client in (waiter, producer):  # both servers have opened the database (after the handshake)
            await call(client, "list_tasks")

        async def wait() -> None:
            start = anyio.current_time()
            result["claim"] = await call(waiter, "claim_task", wait_seconds=30)
            result["waited"] = anyio.current_time() - start

        async with anyio.create_task_group() as tg:
            tg.start_soon(wait)
            await anyio.sleep(1.0)
            await call(producer, "add_tasks", tasks=[{"key": "wake", "title": "wake up"}])
        assert result["claim"]["task"]["key"] == "wake"
        assert 0.9 < result["waited"] < 5, result["waited"]


def test_processes_opening_a_new_database_together(tmp_path):
    """Eight processes create, migrate and write one brand-new file at the same moment: none fails
    (switching a new file to WAL answers BUSY at once; the connection set-up retries)."""
    import subprocess
    import sys

    db = str(tmp_path / "new.db")
    code = (
        "import anyio, sys\nfrom mcp_harness.config import Settings\n"
        "from mcp_harness.arguments import RecordProgressArgs\n"
        "from mcp_harness.service import Harness, Identity\n"
        "async def m():\n"
        "    async with Harness.open(Settings.from_env(sys.argv[1])) as h:\n"
        "        await h.progress.record(Identity('w', sys.argv[2]), RecordProgressArgs(summary='hello'))\n"
        "anyio.run(m)"
    )
    for _round in range(3):
        fresh = f"{db}.{_round}"
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", code, fresh, f"p{i}"], env=subprocess_env(), stderr=subprocess.PIPE, text=True
            )
            for i in range(8)
        ]
        failures = [p.communicate(timeout=120)[1] for p in procs if p.wait(timeout=120) != 0]
        assert failures == [], failures[0][-800:]
