"""Two Claude Code sessions side by side on one SQLite file, each a client process with its own stdio
server (different `CLAUDE_CODE_SESSION_ID`s) and its hooks: they never share a lease; a hook acts for
its server's identity even after /clear (a new session id for hooks, the old one for the server); a
session that ends while holding a task leaves it to the other at once, with the reason."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
from support import subprocess_env

pytestmark = pytest.mark.slow

HELPER = Path(__file__).parent / "helpers" / "session_client.py"


class Session:
    def __init__(self, db: str, workspace: str, session_id: str, runtime: Path) -> None:
        self.id = session_id
        env = subprocess_env(XDG_RUNTIME_DIR=str(runtime))
        self.proc = subprocess.Popen(
            [sys.executable, str(HELPER), db, workspace, session_id],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert json.loads(self.proc.stdout.readline()) == {"ready": True}

    def ask(self, order: dict[str, Any]) -> dict[str, Any]:
        self.proc.stdin.write(json.dumps(order) + "\n")
        self.proc.stdin.flush()
        return json.loads(self.proc.stdout.readline())

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        return self.ask({"tool": name, "arguments": arguments})

    def hook(self, event: str, session_id: str | None = None, **fields: Any) -> dict[str, Any]:
        data = {
            "session_id": session_id or self.id,
            "transcript_path": "/tmp/t.jsonl",
            "cwd": "/tmp",
            "hook_event_name": event,
            **fields,
        }
        return self.ask({"hook": event, "input": data})

    def shell(self, *argv: str, **env: str) -> dict[str, Any]:
        """`mcp-harness ARGV` from the session's shell (a child of the client, as its Bash tool runs one)."""
        return self.ask({"run": list(argv), "env": env})

    def close(self) -> None:
        self.proc.stdin.close()
        assert self.proc.wait(timeout=60) == 0


def eventually(check: Any, seconds: float = 30) -> Any:
    """`check()` once it is truthy: a writing hook leaves its write to a process of its own and returns
    at once, so what it wrote shows a moment later."""
    deadline = time.monotonic() + seconds
    while not (found := check()) and time.monotonic() < deadline:
        time.sleep(0.1)
    return found


def context(answer: dict[str, Any]) -> str:
    assert answer["stderr"] == "", answer["stderr"]
    return json.loads(answer["stdout"])["hookSpecificOutput"]["additionalContext"]


def test_two_sessions_never_share_a_lease_and_an_ended_one_hands_its_task_over(tmp_path):
    db, ws = str(tmp_path / "h.db"), "shop"
    one = Session(db, ws, "aaaa1111-0000-4000-8000-000000000001", tmp_path)
    two = Session(db, ws, "bbbb2222-0000-4000-8000-000000000002", tmp_path)
    try:
        one.tool("add_tasks", tasks=[{"key": "k1", "title": "first"}, {"key": "k2", "title": "second"}])
        got1 = one.tool("claim_task", lease_seconds=3600)
        got2 = two.tool("claim_task", lease_seconds=3600)
        assert {got1["task"]["key"], got2["task"]["key"]} == {"k1", "k2"}  # one lease each, never shared
        assert two.tool("claim_task")["task"] is None
        mine = one.tool("restore_state")["my_tasks"]
        assert [t["key"] for t in mine] == [got1["task"]["key"]]

        # /clear: the hooks get a new session id, the server keeps its own (and its identity)
        start = context(one.hook("SessionStart", "cccc3333-0000-4000-8000-000000000003", source="clear"))
        assert start.startswith("mcp-harness: this session is agent claude-code:aaaa1111 in workspace shop")
        assert f"You hold (agent claude-code:aaaa1111): {got1['task']['key']}" in start
        assert one.hook("SessionEnd", "aaaa1111-0000-4000-8000-000000000001", reason="clear") == {
            "stdout": "",
            "stderr": "",
        }
        assert two.tool("claim_task")["task"] is None  # /clear ended nothing

        # compacted and resumed: the brief restores the held task
        assert one.hook("PreCompact", "cccc3333-0000-4000-8000-000000000003", trigger="manual")["stderr"] == ""
        assert eventually(
            lambda: any(
                "compacted (manual)" in e["summary"]
                for e in one.tool("restore_state", progress_limit=5)["recent_progress"]
            )
        )
        again = context(one.hook("SessionStart", "cccc3333-0000-4000-8000-000000000003", source="compact"))
        assert f"Task you hold: {got1['task']['key']}" in again and "was compacted (manual)" in again

        # the session ends while holding its task: the other takes it at once, with the reason
        assert one.hook("SessionEnd", "cccc3333-0000-4000-8000-000000000003", reason="logout") == {
            "stdout": "",
            "stderr": "",
        }
        taken = eventually(lambda: (got := two.tool("claim_task", wait_seconds=0))["task"] and got)
        assert taken["task"]["key"] == got1["task"]["key"] and taken["lease"]["attempt"] == 2
        log = two.tool("restore_state", progress_limit=10)["recent_progress"]
        assert any(
            "the lease of claude-code:aaaa1111 on task" in e["summary"] and "(logout)" in e["summary"] for e in log
        )
        told = context(one.hook("UserPromptSubmit", "cccc3333-0000-4000-8000-000000000003", prompt="go on"))
        assert "your lease ended and claude-code:bbbb2222 took the task over" in told

        # --resume: a new client process whose server gets the same session id again is the same agent
        one.close()
        one = Session(db, ws, "aaaa1111-0000-4000-8000-000000000001", tmp_path)
        resumed = context(one.hook("SessionStart", source="resume"))
        assert resumed.startswith("mcp-harness: this session is agent claude-code:aaaa1111 in workspace shop")
        one.tool("add_tasks", tasks=[{"key": "k3", "title": "third"}])
        assert one.tool("claim_task")["task"]["key"] == "k3"
        rows = {r["key"]: r.get("owner") for r in one.tool("list_tasks")["tasks"]}
        assert rows["k3"] == "claude-code:aaaa1111" and rows[got1["task"]["key"]] == "claude-code:bbbb2222"
    finally:
        one.close()
        two.close()
    assert not list((tmp_path / "mcp-harness").glob("*.json"))  # each server removed its record at exit


def test_msg_from_a_sessions_shell_acts_as_its_servers_identity(tmp_path):
    """`mcp-harness msg` run in a session's shell (after /clear: a new session id there) sends, lists and
    acknowledges as the session's agent, as the hooks and the guard resolve it, so a reply reaches the
    session; a shell with only a session id derives it; a person's terminal is the login name."""
    import getpass
    import re

    from support import run_cli

    from mcp_harness.config import NAME_PATTERN

    db, ws = str(tmp_path / "m.db"), "shop"
    where = ("--db", db, "--workspace", ws)
    one = Session(db, ws, "aaaa1111-0000-4000-8000-000000000001", tmp_path)
    try:
        one.tool("add_tasks", tasks=[{"key": "k1", "title": "first"}])
        cleared = {"CLAUDE_CODE_SESSION_ID": "cccc3333-0000-4000-8000-000000000003"}
        sent = one.shell("msg", "send", "--to", "bob", "may I take src/api?", *where, **cleared)
        assert sent["code"] == 0, sent
        [got] = json.loads(run_cli("msg", "list", "--agent", "bob", "--json", *where).stdout)["messages"]
        assert got["from"] == "claude-code:aaaa1111" and got["body"] == "may I take src/api?"
        assert sent["stdout"].startswith("sent msg_") and sent["stdout"].rstrip().endswith(" as claude-code:aaaa1111")
        reply = run_cli("msg", "send", "--agent", "bob", "--to", got["from"], "--reply-to", got["id"], "yes", *where)
        assert reply.returncode == 0, reply.stderr
        one.tool("message", action="send", to="operators", body="for the people only")

        listed = json.loads(one.shell("msg", "list", "--json", *where, **cleared)["stdout"])
        assert [m["body"] for m in listed["messages"]] == ["yes"] and listed["unread"] == 1  # not the operators'
        acked = one.shell("msg", "ack", listed["messages"][0]["id"], "--json", *where, **cleared)
        assert json.loads(acked["stdout"]) == {"acked": 1}, acked
        assert one.tool("message", action="read")["unread"] == 0  # the server's own identity: acknowledged
    finally:
        one.close()

    no_server = run_cli(
        "msg", "send", "--to", "bob", "hi", *where, env=subprocess_env(CLAUDE_CODE_SESSION_ID="dddd4444-0000")
    )
    assert no_server.stdout.rstrip().endswith("as claude-code:dddd4444"), no_server
    named = run_cli("msg", "send", "--to", "bob", "hi", *where, env=subprocess_env(MCP_HARNESS_AGENT="cursor"))
    assert named.stdout.rstrip().endswith("as cursor"), named
    login = getpass.getuser()
    login = login if re.fullmatch(NAME_PATTERN, login) else "operator"
    person = run_cli("msg", "list", "--all", *where)
    assert "for the people only" in person.stdout, person  # a person reads what the operators are sent
    assert run_cli("msg", "send", "--to", "bob", "hi", *where).stdout.rstrip().endswith(f"as {login}")
