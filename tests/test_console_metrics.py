"""The metrics an operator alerts on: series at zero from the start, tasks completed, failed and
retried, the oldest task in review and the oldest ready one, console actions, process and version."""

from __future__ import annotations

import re

import pytest
from mcp import Client
from support import settings_for

import mcp_harness.console.actions  # noqa: F401 - /metrics is served beside the console, which names its actions
from mcp_harness import __version__, clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.mcp.metrics import render
from mcp_harness.mcp.server import create_server
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


def value(text: str, series: str) -> float:
    found = re.search(rf"^{re.escape(series)} (\S+)$", text, re.M)
    assert found, f"{series} is not in the metrics"
    return float(found.group(1))


async def test_series_start_at_zero_and_process_and_version_are_shown(harness: Harness):
    create_server(harness.settings, Identity("w", "a"))  # a server registers every tool's series
    text = (await render(harness)).decode()
    assert value(text, 'mcp_harness_tool_calls_total{code="ok",tool="claim_task"}') >= 0
    for outcome in ("completed", "failed", "retried"):
        assert value(text, f'mcp_harness_tasks_ended_total{{outcome="{outcome}"}}') >= 0
    for action in ("approve", "reject", "reopen", "cancel"):
        assert value(text, f'mcp_harness_console_actions_total{{action="{action}"}}') >= 0
    assert value(text, f'mcp_harness_build_info{{version="{__version__}"}}') == 1
    assert "python_info{" in text and "process_resident_memory_bytes" in text


async def test_a_fresh_workspace_has_every_series_an_alert_watches_at_once(db_url: str, workspace: str):
    """Every task status, expired leases and both ages exist at 0 for a workspace as soon as it exists
    (an absence alert on `oldest_ready_seconds` or a `tasks{status="failed"} > 0` alert works from the start),
    in the view of every workspace and in the workspace's own view, even one that holds nothing yet."""
    settings = settings_for(db_url)
    async with Client(create_server(settings, Identity(workspace, "ana"))) as client:
        await client.call_tool("record_progress", {"summary": "set up the repository"})  # no task at all
    busy = f"{workspace}-busy"
    async with Client(create_server(settings, Identity(busy, "ana"))) as client:
        await client.call_tool("add_tasks", {"tasks": [{"key": "a", "title": "a"}]})
    every = (await _render(settings)).decode()
    async with Harness.open(settings) as h:
        own, empty = (await render(h, workspace)).decode(), (await render(h, f"{workspace}-none")).decode()
    for text, names in ((every, (workspace, busy)), (own, (workspace,)), (empty, (f"{workspace}-none",))):
        for ws in names:
            for status in ("pending", "claimed", "in_review", "done", "failed", "cancelled", "blocked"):
                expected = 1 if (ws, status) == (busy, "pending") else 0
                assert value(text, f'mcp_harness_tasks{{status="{status}",workspace="{ws}"}}') == expected
            assert value(text, f'mcp_harness_leases_expired{{workspace="{ws}"}}') == 0
            assert value(text, f'mcp_harness_oldest_in_review_seconds{{workspace="{ws}"}}') == 0
            assert value(text, f'mcp_harness_oldest_ready_seconds{{workspace="{ws}"}}') >= 0
            assert value(text, f'mcp_harness_leases_taken_over_total{{workspace="{ws}"}}') == 0
    assert f"{workspace}-none" not in every  # a name nobody wrote to is not invented in the view of all


async def test_tasks_ended_are_counted_by_outcome_through_the_server(db_url: str, workspace: str):
    settings = settings_for(db_url, backoff_base_seconds=0.01)
    before = (await _render(settings)).decode()
    counts = {
        o: value(before, f'mcp_harness_tasks_ended_total{{outcome="{o}"}}') for o in ("completed", "failed", "retried")
    }
    server = create_server(settings, Identity(workspace, "ana"))
    async with Client(server) as client:
        await client.call_tool(
            "add_tasks", {"tasks": [{"key": "a", "title": "a"}, {"key": "b", "title": "b", "max_attempts": 1}]}
        )
        for key, action, extra in (("a", "fail", {"error": "flaky"}), ("b", "fail", {"error": "broken"})):
            got = (await client.call_tool("claim_task", {"task_key": key})).structured_content
            await client.call_tool(
                "update_task", {"task_key": key, "action": action, "lease_token": got["lease"]["token"], **extra}
            )
        clock.advance(60)  # a's retry backoff ends
        got = (await client.call_tool("claim_task", {"task_key": "a"})).structured_content
        done = {"task_key": "a", "action": "complete", "lease_token": got["lease"]["token"], "verification": "ok"}
        await client.call_tool("update_task", done)
    after = (await _render(settings)).decode()
    for outcome in ("completed", "failed", "retried"):
        assert value(after, f'mcp_harness_tasks_ended_total{{outcome="{outcome}"}}') == counts[outcome] + 1, outcome


async def _render(settings) -> bytes:
    async with Harness.open(settings) as h:
        return await render(h)


async def test_the_oldest_task_in_review_and_the_oldest_ready_one_are_aged(harness: Harness, workspace: str):
    ana = Identity(workspace, "ana")
    await harness.tasks.add(
        ana, AddTasksArgs(tasks=[{"key": "r", "title": "r", "review": True}, {"key": "idle", "title": "idle"}])
    )
    got = await harness.tasks.claim(ana, ClaimTaskArgs(task_key="r"))
    await harness.tasks.update(
        ana, UpdateTaskArgs(task_key="r", action="complete", lease_token=got.lease.token, verification="ok")
    )
    clock.advance(90)
    text = (await render(harness)).decode()
    assert value(text, f'mcp_harness_oldest_in_review_seconds{{workspace="{workspace}"}}') >= 90
    assert value(text, f'mcp_harness_oldest_ready_seconds{{workspace="{workspace}"}}') >= 90
    scoped = (await render(harness, workspace)).decode()  # a workspace's own view has them too
    assert f'mcp_harness_oldest_in_review_seconds{{workspace="{workspace}"}}' in scoped


async def test_a_claims_latency_leaves_out_its_wait_which_has_its_own_histogram(sqlite_url: str, workspace: str):
    settings = settings_for(sqlite_url, poll_interval_seconds=0.05)
    before = (await _render(settings)).decode()
    waits = value(before, "mcp_harness_claim_wait_seconds_count")
    slow = value(before, 'mcp_harness_tool_call_seconds_bucket{le="0.25",tool="claim_task"}')
    calls = value(before, 'mcp_harness_tool_call_seconds_count{tool="claim_task"}')
    async with Client(create_server(settings, Identity(workspace, "ana"))) as client:
        got = await client.call_tool("claim_task", {"wait_seconds": 0.6})  # nothing to claim: it waits
        assert got.structured_content["task"] is None
    after = (await _render(settings)).decode()
    assert value(after, "mcp_harness_claim_wait_seconds_count") == waits + 1
    assert value(after, "mcp_harness_claim_wait_seconds_sum") >= 0.5
    assert value(after, 'mcp_harness_tool_call_seconds_count{tool="claim_task"}') == calls + 1
    # the call took 0.6 s, but its latency without the wait is under 0.25 s
    assert value(after, 'mcp_harness_tool_call_seconds_bucket{le="0.25",tool="claim_task"}') == slow + 1
