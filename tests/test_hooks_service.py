"""`tasks.end_leases`: a session's end (the SessionEnd hook; a stdio connection's end) ends its live
leases as if they expired now, on both backends."""

from __future__ import annotations

import pytest

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


async def test_an_ended_session_leaves_its_task_to_the_next_claim_at_once(harness: Harness, workspace: str):
    ann, bob = Identity(workspace, "claude-code:aaaa1111"), Identity(workspace, "claude-code:bbbb2222")
    await harness.tasks.add(ann, AddTasksArgs(tasks=[TaskSpec(key="k", title="t"), TaskSpec(key="other", title="o")]))
    held = await harness.tasks.claim(ann, ClaimTaskArgs(task_key="k", lease_seconds=600))
    assert held.task is not None
    mine = await harness.tasks.claim(bob, ClaimTaskArgs(task_key="other", lease_seconds=600))
    assert mine.task is not None

    assert await harness.tasks.end_leases(ann, "the session ended (SessionEnd: logout)") == ["k"]
    row = (await harness.tasks.story(ann, "k")).task
    assert row.owner == ann.agent  # the owner stays until a claim takes it over

    taken = await harness.tasks.claim(bob, ClaimTaskArgs(lease_seconds=600))
    assert taken.task is not None and taken.task.key == "k"
    assert taken.lease.attempt == 2  # the ended attempt stays counted
    notes = await harness.progress.recent(bob, task_key="k")
    texts = [n.summary for n in notes]
    assert any("the lease of claude-code:aaaa1111 on task k ended: the session ended" in t for t in texts), texts
    assert await harness.tasks.end_leases(ann, "again") == []  # nothing live is left to end
    assert (await harness.tasks.story(bob, "other")).task.owner == bob.agent


async def test_on_the_last_attempt_the_task_fails_at_once(harness: Harness, workspace: str):
    ann = Identity(workspace, "ann")
    await harness.tasks.add(ann, AddTasksArgs(tasks=[TaskSpec(key="k", title="t", max_attempts=1)]))
    await harness.tasks.claim(ann, ClaimTaskArgs(task_key="k"))
    assert await harness.tasks.end_leases(ann, "the session ended") == ["k"]
    assert (await harness.tasks.story(ann, "k")).task.status == "failed"
