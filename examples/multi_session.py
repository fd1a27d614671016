"""A project told by its log: an initializer and two coding agents over stdio, then `mcp-harness log`.

Every session is the official MCP client talking to its own `mcp-harness serve` process on one SQLite
file, as separate agents on one machine would. No LLM: each session does what the server's prompts say.

1. The initializer (agent `planner`) reads `initialize_project`, restores (nothing yet), adds five
   tasks with acceptance steps and dependencies, saves the shared facts and records the plan.
2. Agent `ann` claims `docs` and its session ends without a word (no release): the end of its
   connection ends the lease (the harness notes it), so `docs` is free again at once.
3. Agents `ann` (a new session) and `bo` work side by side, ONE task at a time each: claim, verify,
   complete, record progress with the task's key. The first attempt at `api` fails (a flaky
   integration test), so the harness backs it off and a later claim retries it. `docs` is taken over
   at once. A handoff: whoever first claims `ui` runs out of time, releases it with a reason and stops;
   the other agent's claim of `ui` carries that reason and `api`'s result in the task's `context`.
4. A tester finds that `schema` missed a column and reopens it with a reason; `ann` fixes it again.

Then `mcp-harness log` tells the whole story, the harness's own entries included (the failure and its
retry, the take-over, the release, the reopen), without anyone reading the database.

Run it:  python examples/multi_session.py [--db PATH]      (about 10 seconds)
It prints what each session does, then the log, and last one JSON line with the facts a test checks.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

WORKSPACE = "shop"
PLAN = [
    {
        "key": "schema",
        "title": "Database schema for products and orders",
        "priority": 9,
        "steps": ["migrations run on an empty database", "products and orders tables exist"],
    },
    {
        "key": "api",
        "title": "REST API for the catalogue",
        "priority": 8,
        "depends_on": ["schema"],
        "steps": ["GET /products lists products", "the integration tests pass"],
    },
    {
        "key": "ui",
        "title": "Catalogue page",
        "priority": 7,
        "depends_on": ["api"],
        "steps": ["the page lists products from the API"],
    },
    {
        "key": "docs",
        "title": "README: how to run and test",
        "priority": 5,
        "steps": ["a new developer runs the app from the README alone"],
    },
    {"key": "ci", "title": "CI runs the tests on every push", "priority": 4, "steps": ["a push runs the tests"]},
]
SHORT_LEASE = 10  # seconds: the shortest lease
UI_REASON = "out of time: the page lists products, pagination is still missing"


def server(db: str, agent: str) -> StdioServerParameters:
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "PYTHON", "VIRTUAL", "LANG"))}
    env["MCP_HARNESS_BACKOFF_BASE_SECONDS"] = "1"  # a failed task is retried after 1 s, not 5 s
    args = ["-m", "mcp_harness", "serve", "--db", db, "--workspace", WORKSPACE, "--agent", agent]
    return StdioServerParameters(command=sys.executable, args=args, env=env)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    return result.structured_content


async def initializer(db: str) -> None:
    async with Client(server(db, "planner"), read_timeout_seconds=30) as client:
        await client.get_prompt("initialize_project", {"goal": "a small web shop"})
        brief = await call(client, "restore_state")
        assert not any(brief["task_counts"].values()), "already initialized"
        await call(client, "add_tasks", tasks=PLAN, idempotency_key="plan-v1")
        await call(
            client,
            "save_checkpoint",
            label="initialized",
            state={"goal": "a small web shop", "stack": "FastAPI + SQLite", "test": "make test"},
        )
        await call(
            client,
            "record_progress",
            summary="planned 5 tasks: schema -> api -> ui, docs, ci",
            status="done",
            next_steps=["schema", "docs"],
        )
        print("planner: 5 tasks added, shared facts saved, plan recorded")


async def dying_session(db: str) -> None:
    """ann takes `docs` and its session ends abruptly: no release, no progress. Its connection's end ends
    the lease as if it had expired (a `kill -9` of the server would leave it to run out instead)."""
    async with Client(server(db, "ann"), read_timeout_seconds=30) as client:
        got = await call(client, "claim_task", task_key="docs", lease_seconds=SHORT_LEASE)
        print(f"ann: claimed docs (lease {got['lease']['expires_in_seconds']:.0f} s), then its session ended")


async def coding_agent(db: str, agent: str, story: dict[str, Any]) -> None:
    """The resume_session loop until every task is done: restore, ONE task, verify, complete, record."""
    async with Client(server(db, agent), read_timeout_seconds=30) as client:
        await client.get_prompt("resume_session", {"thread": "main"})
        await call(client, "restore_state")
        while True:
            got = await call(client, "claim_task", wait_seconds=3)  # waits for work to free up
            if got["task"] is None:
                if got["reason"] == "all_done":
                    return
                await anyio.sleep(0.2)  # backoff, or all claimed: ask again
                continue
            task, lease = got["task"], got["lease"]
            key, token = task["key"], lease["token"]
            print(f"{agent}: claimed {key} (attempt {lease['attempt']})")
            if key == "ui" and "handoff" in story:  # the handoff: what the last holder left reaches this one
                context = task.get("context", {})
                story["handoff"].update(
                    claimed_by=agent, notes=context.get("notes", []), dependencies=context.get("dependencies", [])
                )
                print(
                    f"{agent}: ui's context says: {context['notes'][0]['text']!r}; api left "
                    f"{context['dependencies'][0]['result']}"
                )
            await anyio.sleep(0.5)  # the work
            if key == "ui" and "handoff" not in story:  # the first holder runs out of time and stops
                await call(client, "record_progress", summary="ui: the page lists products", task_key=key)
                await call(client, "update_task", task_key=key, action="release", lease_token=token, reason=UI_REASON)
                story["handoff"] = {"released_by": agent}
                print(f"{agent}: released ui ({UI_REASON}) and ended its session")
                return
            if key == "api" and lease["attempt"] == 1:
                await call(
                    client,
                    "update_task",
                    task_key=key,
                    action="fail",
                    lease_token=token,
                    retry=True,
                    error="integration test timed out: the test database was not started",
                )
                await call(
                    client,
                    "record_progress",
                    summary="api: integration test timed out; left for a retry",
                    status="blocked",
                    task_key=key,
                )
                print(f"{agent}: api failed (the harness will back it off and offer it again)")
                continue
            done = await call(
                client,
                "update_task",
                task_key=key,
                action="complete",
                lease_token=token,
                verification=f"checked every step of {key}",
                result={"commit": f"c-{key}"},
            )
            await call(
                client,
                "record_progress",
                summary=f"{key}: done and verified",
                status="done",
                task_key=key,
                artifacts={"commit": f"c-{key}"},
            )
            story["completed_by"][key] = agent
            unblocked = f", unblocked {', '.join(done['unblocked'])}" if done.get("unblocked") else ""
            print(f"{agent}: completed {key}{unblocked}")


async def reopen_and_fix(db: str) -> None:
    async with Client(server(db, "tester"), read_timeout_seconds=30) as client:
        await call(
            client,
            "update_task",
            task_key="schema",
            action="reopen",
            reason="orders has no total column; the checkout needs it",
        )
        print("tester: reopened schema")
    async with Client(server(db, "ann"), read_timeout_seconds=30) as client:
        got = await call(client, "claim_task", task_key="schema")
        await call(
            client,
            "update_task",
            task_key="schema",
            action="complete",
            lease_token=got["lease"]["token"],
            verification="migration adds orders.total; migrations run on an empty database",
        )
        await call(client, "record_progress", summary="schema: added orders.total", status="done", task_key="schema")
        await call(client, "save_checkpoint", mode="merge", state={"schema": {"orders": ["id", "total"]}})
        print("ann: fixed schema again")


def harness_cli(db: str, *args: str) -> str:
    env = {**os.environ, "COLUMNS": "160"}
    cmd = [sys.executable, "-m", "mcp_harness", *args, "--db", db, "--workspace", WORKSPACE]
    return subprocess.run(cmd, capture_output=True, text=True, check=True, env=env, timeout=60).stdout


async def main(db: str) -> dict[str, Any]:
    story: dict[str, Any] = {"completed_by": {}}
    await initializer(db)
    await dying_session(db)
    async with anyio.create_task_group() as tg:  # two agents side by side
        tg.start_soon(coding_agent, db, "ann", story)
        tg.start_soon(coding_agent, db, "bo", story)
    await reopen_and_fix(db)
    log = harness_cli(db, "log", "--limit", "100")
    print("\n$ mcp-harness log\n" + log)
    entries = json.loads(harness_cli(db, "log", "--limit", "100", "--json"))
    board = json.loads(harness_cli(db, "tasks", "--json"))
    return {
        "log": [(e["agent"], e["task_key"], e["summary"]) for e in reversed(entries)],
        "completed_by": story["completed_by"],
        "handoff": story["handoff"],
        "statuses": {t["key"]: t["status"] for t in board["tasks"]},
    }


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", help="SQLite file to use (default: a new temporary one)")
    opts = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        facts = anyio.run(main, opts.db or str(Path(tmp) / "shop.db"))
    print(json.dumps(facts))
