"""Initializer + coding agent, with a crash in the middle: a scripted agent (no LLM) following the
server's own prompts loses its server to SIGKILL and carries on.

Session 1 reads the `initialize_project` prompt and does what it says (restore, plan five tasks with
acceptance steps, a checkpoint labelled "initialized", a progress entry naming the first tasks), then
reads `resume_session` and works: it finishes two tasks, starts the third, and while it is saving, its
server process is killed with SIGKILL. Session 2 starts a fresh server on the same database, calls
`restore_state` once, and continues exactly where session 1 stopped: same task, same lease, the
next step named by the last progress entry. Every acknowledged write of session 1 is checked.

Run it:  python examples/resume_after_crash.py [--db PATH]
It prints what happens and, last, one JSON line with the facts a test checks.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters

WORKSPACE, AGENT = "demo", "coder"
PLAN = [
    {"key": f"step-{i}", "title": title, "steps": [f"check {title}"], "priority": 10 - i}
    for i, title in enumerate(["scaffold", "models", "api", "ui", "docs"], start=1)
]


def server_params(db: str, pidfile: Path) -> StdioServerParameters:
    """Launch `mcp-harness serve` through a tiny exec wrapper that records the server's PID."""
    launcher = (
        "import os, sys; open(sys.argv[1], 'w').write(str(os.getpid())); "
        "os.execv(sys.executable, [sys.executable, '-m', 'mcp_harness', *sys.argv[2:]])"
    )
    args = ["-c", launcher, str(pidfile), "serve", "--db", db, "--workspace", WORKSPACE, "--agent", AGENT]
    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "PYTHON", "VIRTUAL", "LANG"))}
    return StdioServerParameters(command=sys.executable, args=args, env=env)


async def call(client: Client, tool: str, **arguments: Any) -> dict[str, Any]:
    result = await client.call_tool(tool, arguments)
    if result.is_error:
        raise RuntimeError(result.content[0].text)
    return result.structured_content


async def session_one(db: str, pidfile: Path) -> dict[str, Any]:
    acked: dict[str, Any] = {"progress": [], "checkpoints": []}
    try:
        async with Client(server_params(db, pidfile), read_timeout_seconds=30) as client:
            # Phase 1, the initializer, step by step as the prompt says.
            prompt = await client.get_prompt("initialize_project", {"goal": "a small web shop"})
            print("session 1: initializer prompt:", prompt.messages[0].content.text.splitlines()[0])
            brief = await call(client, "restore_state")
            assert not any(brief["task_counts"].values()), "already initialized"
            await call(client, "add_tasks", tasks=PLAN, idempotency_key="plan-v1")
            saved = await call(
                client, "save_checkpoint", state={"goal": "a small web shop", "done": {}}, label="initialized"
            )
            acked["checkpoints"].append(saved["version"])
            entry = await call(
                client,
                "record_progress",
                summary="planned 5 tasks",
                status="done",
                next_steps=[t["key"] for t in PLAN[:2]],
            )
            acked["progress"].append(entry["seq"])
            # Phase 2, a working session: restore, ONE task at a time, verify, record, save.
            prompt = await client.get_prompt("resume_session", {"thread": "main"})
            print("session 1: working-session prompt:", prompt.messages[0].content.text.splitlines()[0])
            for _ in range(2):
                got = await call(client, "claim_task")
                key, token = got["task"]["key"], got["lease"]["token"]
                await call(
                    client,
                    "update_task",
                    task_key=key,
                    action="complete",
                    lease_token=token,
                    verification=f"ran the check for {key}",
                )
                entry = await call(
                    client,
                    "record_progress",
                    summary=f"finished {key}",
                    status="done",
                    task_key=key,
                    artifacts={"commit": f"c-{key}"},
                )
                acked["progress"].append(entry["seq"])
                saved = await call(client, "save_checkpoint", mode="merge", state={"done": {key: True}, "last": key})
                acked["checkpoints"].append(saved["version"])
                print(f"session 1: completed {key}, checkpoint v{saved['version']}")
            got = await call(client, "claim_task")
            key = got["task"]["key"]
            acked["held"], acked["token"] = key, got["lease"]["token"]
            entry = await call(
                client,
                "record_progress",
                summary=f"started {key}: wrote the routes",
                status="in_progress",
                task_key=key,
                next_steps=[f"{key}: add input validation", f"{key}: run the check"],
            )
            acked["progress"].append(entry["seq"])
            saved = await call(client, "save_checkpoint", mode="merge", state={"current": key, "routes": ["/a"]})
            acked["checkpoints"].append(saved["version"])
            print(f"session 1: working on {key}; now the server is killed mid-save")

            async def in_flight_save() -> None:
                saved = await call(client, "save_checkpoint", mode="merge", state={"routes": ["/a", "/b"]})
                acked["checkpoints"].append(saved["version"])  # acknowledged just before the kill: must survive
                print("session 1: the in-flight save was acknowledged before the kill")

            async with anyio.create_task_group() as tg:
                tg.start_soon(in_flight_save)
                await anyio.sleep(0)
                os.kill(int(pidfile.read_text()), signal.SIGKILL)
                print("session 1: server process SIGKILLed")
    except* Exception as group:  # the connection dies with the server: that is the point
        print(f"session 1: connection lost ({type(group.exceptions[0]).__name__}); nothing unacknowledged is promised")
    return acked


async def session_two(db: str, pidfile: Path, acked: dict[str, Any]) -> dict[str, Any]:
    async with Client(server_params(db, pidfile), read_timeout_seconds=30) as client:
        brief = await call(client, "restore_state", progress_limit=10)
        held = brief["my_tasks"][0]
        ours = next(e for e in brief["recent_progress"] if e.get("next_steps"))  # the newest may be the harness's
        print(f"session 2: restore_state says I hold {held['key']}; next: {ours['next_steps']}")
        seqs = {e["seq"] for e in brief["recent_progress"]}
        history = await call(client, "list_checkpoints", limit=200)
        versions = {c["version"] for c in history["checkpoints"]}
        facts = {
            "all_progress_kept": set(acked["progress"]) <= seqs,
            "all_checkpoints_kept": set(acked["checkpoints"]) <= versions,
            "held_task": held["key"],
            "same_lease": held["lease"]["token"] == acked["token"],
            "next_step": ours["next_steps"][0],
            "state_current": brief["state"]["current"],
        }
        done = await call(
            client,
            "update_task",
            task_key=held["key"],
            action="complete",
            lease_token=held["lease"]["token"],
            verification="validation added; check passes",
        )
        await call(
            client,
            "record_progress",
            summary=f"finished {held['key']} after resuming",
            status="done",
            task_key=held["key"],
        )
        await call(client, "save_checkpoint", mode="merge", state={"done": {held["key"]: True}, "current": None})
        facts["completed_after_resume"] = done["status"] == "done"
        facts["task_counts"] = (await call(client, "restore_state"))["task_counts"]
        print(f"session 2: completed {held['key']}; board now {facts['task_counts']}")
        return facts


async def main(db: str) -> dict[str, Any]:
    pidfile = Path(tempfile.mkdtemp()) / "server.pid"
    acked = await session_one(db, pidfile)
    return await session_two(db, pidfile, acked)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=str(Path(tempfile.mkdtemp()) / "resume-demo.db"))
    facts = anyio.run(main, parser.parse_args().db)
    print(json.dumps(facts))
    ok = facts["all_progress_kept"] and facts["all_checkpoints_kept"] and facts["same_lease"]
    raise SystemExit(0 if ok and facts["completed_after_resume"] else 1)
