"""Replays (contract revision 3): a result returned for a repeated idempotency_key says `replayed: true`,
on every mutating tool, and changes nothing; the published schemas carry the field."""

from __future__ import annotations

import pytest
from support import call

from mcp_harness.arguments import RecordProgressArgs
from mcp_harness.models import RecordProgressResult
from mcp_harness.service import Identity

pytestmark = pytest.mark.anyio


async def twice(client, tool: str, **arguments) -> tuple[dict, dict]:
    first = await call(client, tool, **arguments)
    again = await call(client, tool, **arguments)
    assert "replayed" not in first, f"{tool}: a first answer is not a replay"
    if "lease" in again and again["lease"]:  # a lease answered again shows the seconds left now
        assert again["lease"]["expires_in_seconds"] <= first["lease"]["expires_in_seconds"]
        again["lease"]["expires_in_seconds"] = first["lease"]["expires_in_seconds"]
    assert again == {**first, "replayed": True}, tool
    return first, again


async def test_every_mutating_tool_marks_a_replay(client):
    await twice(client, "save_checkpoint", state={"goal": "g"}, idempotency_key="s-1")
    await twice(client, "record_progress", summary="started", idempotency_key="p-1")
    await twice(
        client, "add_tasks", tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B"}], idempotency_key="add-1"
    )
    # (the task work will answer a replayed claim or update with the task's status now: `replay=`)
    claimed, _ = await twice(client, "claim_task", task_key="a", idempotency_key="c-1")
    token = claimed["lease"]["token"]
    await twice(client, "update_task", task_key="a", action="heartbeat", lease_token=token, idempotency_key="h-1")
    await twice(
        client,
        "update_task",
        task_key="a",
        action="complete",
        lease_token=token,
        verification="ran it",
        idempotency_key="u-1",
    )
    # and nothing happened twice
    brief = await call(client, "restore_state", progress_limit=10)
    assert brief["checkpoint"]["version"] == 1 and [e["summary"] for e in brief["recent_progress"]] == ["started"]
    assert brief["task_counts"] == {"pending": 1, "done": 1}


async def test_a_fresh_key_is_a_new_request(client):
    await call(client, "record_progress", summary="one", idempotency_key="p-1")
    other = await call(client, "record_progress", summary="two", idempotency_key="p-2")
    assert other["seq"] == 2 and "replayed" not in other


async def test_published_schemas_and_argument_say_it(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    for name in ("save_checkpoint", "record_progress", "add_tasks", "claim_task", "update_task"):
        assert tools[name].output_schema["properties"]["replayed"]["type"] == ["boolean", "null"], name
        described = tools[name].input_schema["properties"]["idempotency_key"]["description"]
        assert described == "a fresh unique id per request (e.g. a UUID), reused only to retry that same request"


async def test_the_replay_hook_brings_a_stored_result_up_to_date(harness, workspace):
    """`exactly_once(replay=...)`: where a stale copy would mislead (a claim's lease no longer live), the
    service refreshes the stored result inside the same transaction; the answer is still a replay."""
    ident = Identity(workspace, "a")
    args = RecordProgressArgs(summary="s", idempotency_key="k")
    seen: list[int] = []

    async def body(conn) -> RecordProgressResult:
        return RecordProgressResult(entry_id="pg_x", seq=1, created_at="2026-12-01T16:09:26Z")

    async def replay(conn, stored: RecordProgressResult) -> RecordProgressResult:
        seen.append(stored.seq)
        return stored.model_copy(update={"seq": 2})

    first = await harness.progress.exactly_once(ident, args, RecordProgressResult, body, replay=replay)
    again = await harness.progress.exactly_once(ident, args, RecordProgressResult, body, replay=replay)
    assert seen == [1] and first.replayed is None and (again.seq, again.replayed) == (2, True)
