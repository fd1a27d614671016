"""Three agents share one HTTP server and drain a task list with dependencies; one is killed midway.

Starts `mcp-harness serve --transport http` on a free loopback port with a fresh database, creates a
bearer token per agent, adds a small build plan (later tasks depend on earlier ones), and starts three
agent processes that claim, work and complete. Midway one agent is SIGKILLed while it holds a task:
its lease (10 s) runs out, a teammate claims the task again, and the plan finishes.

Run it:  python examples/http_team.py
It prints what happens and, last, one JSON line with the facts a test checks.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PLAN = [
    ("schema", []),
    ("models", ["schema"]),
    ("api-users", ["models"]),
    ("api-orders", ["models"]),
    ("ui-users", ["api-users"]),
    ("ui-orders", ["api-orders"]),
    ("docs", []),
    ("e2e", ["ui-users", "ui-orders"]),
    ("lint", []),
    ("release", ["e2e", "docs", "lint"]),
]


def cli(db: str, *args: str) -> str:
    out = subprocess.run(
        [sys.executable, "-m", "mcp_harness", *args, "--db", db], capture_output=True, text=True, check=True
    )
    return out.stdout.strip().splitlines()[-1]


def run_agent(url: str, token: str, name: str, log: str) -> None:
    """One agent: claim, 'work' for a moment, complete; until the plan is done."""
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=60) as http,
            Client(streamable_http_client(url, http_client=http), read_timeout_seconds=60) as client,
        ):
            while True:
                got = (
                    await client.call_tool("claim_task", {"lease_seconds": 10, "wait_seconds": 5})
                ).structured_content
                if got["task"] is None:
                    if got["reason"] == "all_done":
                        return
                    continue
                key = got["task"]["key"]
                with open(log, "a") as f:
                    f.write(f"claimed {key} {name} attempt {got['lease']['attempt']} at {time.time()}\n")
                await anyio.sleep(0.4)  # the work
                result = await client.call_tool(
                    "update_task",
                    {
                        "task_key": key,
                        "action": "complete",
                        "lease_token": got["lease"]["token"],
                        "verification": f"{name} ran the checks for {key}",
                    },
                )
                if not result.is_error:
                    await client.call_tool(
                        "record_progress", {"summary": f"{name} finished {key}", "status": "done", "task_key": key}
                    )
                    with open(log, "a") as f:
                        f.write(f"completed {key} {name}\n")

    anyio.run(main)


def main() -> dict:
    work = Path(tempfile.mkdtemp())
    db, log = str(work / "team.db"), str(work / "team.log")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    tokens = {name: cli(db, "token", "create", "--workspace", "team", "--agent", name) for name in ("ann", "bo", "cy")}
    server = subprocess.Popen(
        [sys.executable, "-m", "mcp_harness", "serve", "--transport", "http", "--port", str(port), "--db", db],
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}/mcp"
    try:
        import httpx2

        for _ in range(100):
            try:
                if httpx2.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    break
            except httpx2.HTTPError:
                time.sleep(0.1)
        plan = [{"key": k, "title": k, "depends_on": d, "steps": [f"{k} works end to end"]} for k, d in PLAN]
        _add_plan(url, tokens["ann"], plan)
        print(f"plan of {len(plan)} tasks added; three agents start")
        agents = {
            name: subprocess.Popen([sys.executable, __file__, "agent", url, token, name, log])
            for name, token in tokens.items()
        }
        # Once two tasks are done, kill an agent in the middle of its work: it claimed a task less
        # than 0.2 s ago and works 0.4 s, so it surely holds the lease (someone always is working
        # while tasks remain: a task's dependencies only wait for work in progress).
        victim, killed_holding = None, None
        deadline = time.time() + 30
        while time.time() < deadline and killed_holding is None:
            time.sleep(0.02)
            lines = Path(log).read_text().splitlines() if Path(log).exists() else []
            completed = {line.split()[1] for line in lines if line.startswith("completed")}
            if len(completed) < 2:
                continue
            for name in agents:
                claims = [line.split() for line in lines if line.startswith("claimed") and line.split()[2] == name]
                if claims and claims[-1][1] not in completed and time.time() - float(claims[-1][-1]) < 0.2:
                    os.kill(agents[name].pid, signal.SIGKILL)
                    victim, killed_holding = name, claims[-1][1]
                    print(f"killed agent {victim} while it held {killed_holding}; its lease will run out")
                    break
        for proc in agents.values():
            proc.wait(timeout=120)
        lines = Path(log).read_text().splitlines()
        completions = [line.split()[1] for line in lines if line.startswith("completed")]
        finisher = next((line.split()[2] for line in lines if line.startswith(f"completed {killed_holding} ")), None)
        status = json.loads(
            subprocess.run(
                [sys.executable, "-m", "mcp_harness", "status", "--db", db, "--workspace", "team", "--json"],
                capture_output=True,
                text=True,
            ).stdout
        )
        print(f"{killed_holding} was finished by {finisher}; board: {status['task_counts']}")
        return {
            "victim": victim,
            "killed_holding": killed_holding,
            "finished_by": finisher,
            "completed": sorted(completions),
            "counts": status["task_counts"],
            "order_ok": _order_ok(completions),
        }
    finally:
        server.terminate()
        server.wait(timeout=20)


def _add_plan(url: str, token: str, plan: list[dict]) -> None:
    import anyio
    import httpx2
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    async def add() -> None:
        async with (
            httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}) as http,
            Client(streamable_http_client(url, http_client=http)) as client,
        ):
            result = await client.call_tool("add_tasks", {"tasks": plan, "idempotency_key": "plan-v1"})
            assert not result.is_error, result.content[0].text

    anyio.run(add)


def _order_ok(completions: list[str]) -> bool:
    """Every task completed after all its dependencies."""
    position = {key: i for i, key in enumerate(completions)}
    return all(position[d] < position[k] for k, deps in PLAN for d in deps)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "agent":
        run_agent(*sys.argv[2:6])
    else:
        facts = main()
        print(json.dumps(facts))
        ok = facts["killed_holding"] and facts["counts"]["done"] == len(PLAN) and facts["order_ok"]
        raise SystemExit(0 if ok else 1)
