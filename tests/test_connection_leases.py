"""A stdio connection's leases end with it (contract revision 3): when stdin closes or the server gets
SIGTERM, SIGINT or SIGHUP, the leases taken or renewed through it end as if they had expired then, so
another agent claims the task at once, with the note naming the previous holder in its `context`;
`--keep-leases` keeps them to their time. Real server processes over pipes."""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
from support import serve_command, settings_for, subprocess_env

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs
from mcp_harness.service import Harness, Identity

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # every test here starts a server process

INIT = {
    "jsonrpc": "2.0",
    "id": 0,
    "method": "initialize",
    "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}},
}


def _send(proc: subprocess.Popen, message: dict) -> None:
    assert proc.stdin is not None
    proc.stdin.write(json.dumps(message).encode() + b"\n")
    proc.stdin.flush()


def _answer(proc: subprocess.Popen, request_id: int) -> dict:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        assert line, "the server ended before answering"
        message = json.loads(line)
        if message.get("id") == request_id:
            return message


def claim_in_process(url: str, workspace: str, agent: str, *extra: str) -> tuple[subprocess.Popen, dict]:
    """Start `serve` for `agent`, claim a task through it and return the running process and the claim."""
    command = [*serve_command(url, workspace, agent), "--no-session", *extra]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env()
    )
    _send(proc, INIT)
    _answer(proc, 0)
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "claim_task", "arguments": {"lease_seconds": 3600}},
        },
    )
    claimed = _answer(proc, 1)["result"]["structuredContent"]
    assert claimed["task"]["key"] == "a", claimed
    return proc, claimed


async def _plan(url: str, workspace: str) -> None:
    async with Harness.open(settings_for(url)) as h:
        await h.tasks.add(Identity(workspace, "planner"), AddTasksArgs(tasks=[{"key": "a", "title": "A"}]))


async def _claim_now(url: str, workspace: str, agent: str):
    async with Harness.open(settings_for(url)) as h:
        return await h.tasks.claim(Identity(workspace, agent), ClaimTaskArgs(task_key="a"))


@pytest.mark.parametrize("end", ["stdin", "SIGTERM", "SIGINT", "SIGHUP"])
async def test_a_connections_end_hands_its_task_on_at_once(db_url, workspace, end):
    await _plan(db_url, workspace)
    proc, _ = claim_in_process(db_url, workspace, "ann")
    assert proc.stdin is not None
    if end == "stdin":
        proc.stdin.close()
    else:
        proc.send_signal(getattr(signal, end))
    proc.wait(timeout=30)
    stderr = proc.stderr.read().decode() if proc.stderr else ""
    assert "Traceback" not in stderr, stderr

    taken = await _claim_now(db_url, workspace, "bob")  # at once: the lease ended with the connection
    assert taken.task is not None and taken.lease.attempt == 2, taken
    notes = taken.task.context.notes
    why = "stdin closed" if end == "stdin" else end
    assert notes[0].by == "bob" and f"the lease of ann ended: its connection ended ({why})" in notes[0].text, notes
    assert notes[1].by == "ann" and f"its connection ended ({why})" in notes[1].text, notes


async def test_keep_leases_keeps_them_to_their_time(db_url, workspace):
    await _plan(db_url, workspace)
    proc, _ = claim_in_process(db_url, workspace, "ann", "--keep-leases")
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    nothing = await _claim_now(db_url, workspace, "bob")
    assert nothing.task is None and nothing.reason == "all_claimed"


def _call(proc: subprocess.Popen, request_id: int, tool: str, **arguments) -> dict:
    _send(
        proc,
        {"jsonrpc": "2.0", "id": request_id, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
    )
    return _answer(proc, request_id)["result"]


async def test_a_lease_ends_with_the_last_connection_that_took_or_renewed_it(db_url, workspace):
    """Two servers of one agent (`--no-session`): one claims, the other renews the lease; the first one's
    end leaves it live, the second one's ends it."""
    await _plan(db_url, workspace)
    first, claimed = claim_in_process(db_url, workspace, "ann")
    second = subprocess.Popen(
        [*serve_command(db_url, workspace, "ann"), "--no-session"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=subprocess_env(),
    )
    _send(second, INIT)
    _answer(second, 0)
    _send(second, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    renewed = _call(second, 1, "update_task", task_key="a", action="heartbeat", lease_token=claimed["lease"]["token"])
    assert not renewed.get("isError"), renewed
    for proc, live in ((first, True), (second, False)):
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=30)
        got = await _claim_now(db_url, workspace, "bob")
        assert (got.task is None) is live, got


async def test_a_lease_the_connection_reserved_under_still_ends_with_it(db_url, workspace):
    """Calls that use the lease without renewing it (`reserve`, `unreserve`, a progress entry and a
    message about the task) change the task; its end must not read them as another connection's
    renewal: the lease and its reservations end with the connection (a fresh-eyes trial found them
    held to their time)."""
    await _plan(db_url, workspace)
    proc, claimed = claim_in_process(db_url, workspace, "ann")
    token = claimed["lease"]["token"]
    calls = [
        ("update_task", {"action": "reserve", "paths": ["src/api/", "docs/api.md"]}),
        ("update_task", {"action": "unreserve", "paths": ["docs/api.md"]}),
        ("record_progress", {"summary": "api half done", "task_key": "a"}),
        ("message", {"action": "send", "to": "operators", "body": "is v2 frozen?", "task_key": "a"}),
    ]
    for i, (tool, arguments) in enumerate(calls, start=2):
        if tool == "update_task":
            arguments = {"task_key": "a", "lease_token": token, **arguments}
        answer = _call(proc, i, tool, **arguments)
        assert not answer.get("isError"), answer
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    taken = await _claim_now(db_url, workspace, "bob")  # at once, and src/api/ is free again
    assert taken.task is not None and taken.lease.attempt == 2, taken
    assert any("its connection ended (stdin closed)" in note.text for note in taken.task.context.notes), taken
