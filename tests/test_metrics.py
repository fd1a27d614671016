"""The metrics' figures, rendered in-process as `GET /metrics` serves them: leases taken over and
tasks by status per workspace (read from the task counters)."""

from __future__ import annotations

import pytest

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.mcp.metrics import render
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


async def test_a_lease_taken_over_is_counted(harness: Harness, workspace: str) -> None:
    alice, bob = Identity(workspace, "alice"), Identity(workspace, "bob")
    await harness.tasks.add(alice, AddTasksArgs(tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B"}]))
    assert (await harness.tasks.claim(alice, ClaimTaskArgs(task_key="a", lease_seconds=30))).task is not None
    text = (await render(harness)).decode()
    assert f'mcp_harness_leases_taken_over_total{{workspace="{workspace}"}} 0.0' in text  # none yet: at 0
    clock.advance(60)  # alice's lease runs out
    got = await harness.tasks.claim(bob, ClaimTaskArgs(task_key="a"))
    assert got.task is not None and got.task.key == "a"
    assert (
        await harness.tasks.claim(bob, ClaimTaskArgs(task_key="b"))
    ).task is not None  # a plain claim is not a take-over
    text = (await render(harness)).decode()
    assert f'mcp_harness_leases_taken_over_total{{workspace="{workspace}"}} 1.0' in text
    assert f'mcp_harness_tasks{{status="claimed",workspace="{workspace}"}} 2.0' in text


async def test_tasks_by_status_come_from_the_counters(harness: Harness, workspace: str) -> None:
    ident = Identity(workspace, "a")
    await harness.tasks.add(
        ident,
        AddTasksArgs(
            tasks=[{"key": "base", "title": "base"}, {"key": "next", "title": "next", "depends_on": ["base"]}]
        ),
    )
    got = await harness.tasks.claim(ident, ClaimTaskArgs(task_key="base"))
    await harness.tasks.update(
        ident, UpdateTaskArgs(task_key="base", action="fail", lease_token=got.lease.token, error="x", retry=False)
    )
    text = (await render(harness)).decode()
    assert f'mcp_harness_tasks{{status="failed",workspace="{workspace}"}} 1.0' in text
    assert f'mcp_harness_tasks{{status="blocked",workspace="{workspace}"}} 1.0' in text
    # a status the workspace had keeps its series at 0 (a counter row is never removed)
    assert f'mcp_harness_tasks{{status="pending",workspace="{workspace}"}} 0.0' in text


async def test_a_view_of_one_workspace_shows_nothing_of_another(harness: Harness, workspace: str) -> None:
    mine, theirs = Identity(workspace, "a"), Identity(f"{workspace}-secret", "b")
    await harness.tasks.add(mine, AddTasksArgs(tasks=[{"key": "a", "title": "A"}]))
    await harness.tasks.add(theirs, AddTasksArgs(tasks=[{"key": "b", "title": "B"}]))
    every = (await render(harness)).decode()
    assert f'workspace="{workspace}-secret"' in every and "mcp_harness_claim_waits_total" in every
    one = (await render(harness, workspace)).decode()
    assert f'mcp_harness_tasks{{status="pending",workspace="{workspace}"}} 1.0' in one
    assert "-secret" not in one
    # process-wide counters add up every workspace's calls: not in a view of one
    assert "mcp_harness_tool_calls" not in one and "mcp_harness_claim_waits" not in one


async def test_the_runners_sessions_are_counted_by_outcome_with_their_cost(harness: Harness, workspace: str) -> None:
    await harness.tasks.add(Identity(workspace, "a"), AddTasksArgs(tasks=[{"key": "t", "title": "T"}]))
    text = (await render(harness)).decode()
    assert f'mcp_harness_sessions{{outcome="completed",workspace="{workspace}"}} 0.0' in text  # at 0 before any
    await harness.runs.register(workspace, f"run-{workspace}", "host", 1)
    for n, (outcome, cost) in enumerate([("completed", 0.25), ("completed", None), ("stalled", 0.5)]):
        session = f"{workspace}-s{n}"
        await harness.runs.start_session(
            workspace,
            session,
            runner=f"run-{workspace}",
            slot=1,
            agent=f"claude-code:s{n}",
            task_key="t",
            kind="work",
            transcript=None,
        )
        await harness.runs.end_session(
            session, outcome, exit_code=0, turns=3, cost=cost, last_tool=None, last_words=None
        )
    text = (await render(harness)).decode()
    assert f'mcp_harness_sessions{{outcome="completed",workspace="{workspace}"}} 2.0' in text
    assert f'mcp_harness_sessions{{outcome="stalled",workspace="{workspace}"}} 1.0' in text
    assert f'mcp_harness_sessions_cost_usd{{workspace="{workspace}"}} 0.75' in text
    other = (await render(harness, f"{workspace}-other")).decode()
    assert workspace + '"' not in other.replace(f"{workspace}-other", "")
