"""A lease that was taken over: its old holder's heartbeat, reserve, unreserve and progress about the task
answer `lease_lost` naming the new holder and what to do with the work (the entry is not written); a
lease on the task's last attempt says so (`last_attempt: true`)."""

from __future__ import annotations

import pytest
from support import call, fail, mcp_client

from mcp_harness import clock

pytestmark = pytest.mark.anyio


async def _taken_over(db_url: str, workspace: str) -> str:
    """ann claims `a` (paths src/), her lease runs out and bob takes the task over; ann's old token."""
    async with mcp_client(db_url, workspace, "planner") as planner:
        await call(planner, "add_tasks", tasks=[{"key": "a", "title": "A", "paths": ["src/"]}])
    async with mcp_client(db_url, workspace, "ann") as ann:
        first = await call(ann, "claim_task", lease_seconds=10)
    clock.advance(11)
    async with mcp_client(db_url, workspace, "bob") as bob:
        second = await call(bob, "claim_task")
    assert second["task"]["key"] == "a" and second["lease"]["attempt"] == 2, second
    return first["lease"]["token"]


@pytest.mark.parametrize(
    "action, extra",
    [("heartbeat", {}), ("reserve", {"paths": ["docs/"]}), ("unreserve", {"paths": ["src/"]})],
)
async def test_the_old_holder_of_a_lease_taken_over_is_told_who_works_on_it(db_url, workspace, action, extra):
    token = await _taken_over(db_url, workspace)
    async with mcp_client(db_url, workspace, "ann") as ann:
        lost = await fail(ann, "update_task", task_key="a", action=action, lease_token=token, **extra)
    assert lost.code == "lease_lost", lost.text
    assert "agent 'bob' took the task over" in lost.text, lost.text
    assert "commit your uncommitted work to a branch" in lost.text and "to='bob'" in lost.text, lost.text
    async with mcp_client(db_url, workspace, "bob") as bob:
        (row,) = (await call(bob, "list_tasks", task_key="a"))["tasks"]
    assert row["owner"] == "bob" and row["status"] == "claimed", row


async def test_the_old_holders_progress_about_the_task_is_refused_and_not_written(db_url, workspace):
    await _taken_over(db_url, workspace)
    async with mcp_client(db_url, workspace, "ann") as ann:
        lost = await fail(ann, "record_progress", summary="half of src/ done", task_key="a")
        assert lost.code == "lease_lost", lost.text
        assert "taken over by agent 'bob', who works on it now" in lost.text, lost.text
        assert "message" in lost.text and "branch" in lost.text, lost.text
        await call(ann, "record_progress", summary="about nothing in particular")  # without the task: fine
        log = await call(ann, "restore_state", progress_limit=20)
    summaries = [e["summary"] for e in log["recent_progress"]]
    assert "half of src/ done" not in summaries and "about nothing in particular" in summaries, summaries
    async with mcp_client(db_url, workspace, "cy") as cy:  # someone who never held it may write about it
        await call(cy, "record_progress", summary="bob has a. I take b", task_key="a")
    async with mcp_client(db_url, workspace, "bob") as bob:  # and so may the new holder
        await call(bob, "record_progress", summary="picked up a", task_key="a")


async def test_an_old_holder_who_claims_the_task_again_writes_about_it_again(db_url, workspace):
    await _taken_over(db_url, workspace)
    async with mcp_client(db_url, workspace, "bob") as bob:
        held = (await call(bob, "restore_state"))["my_tasks"][0]
        await call(bob, "update_task", task_key="a", action="release", lease_token=held["lease"]["token"])
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "claim_task", task_key="a")
        await call(ann, "record_progress", summary="back on a", task_key="a")


async def test_a_released_lease_is_not_taken_over(db_url, workspace):
    """Only a take-over stops the old holder's notes: one who released the task may say why afterwards."""
    async with mcp_client(db_url, workspace, "planner") as planner:
        await call(planner, "add_tasks", tasks=[{"key": "a", "title": "A"}])
    async with mcp_client(db_url, workspace, "ann") as ann:
        token = (await call(ann, "claim_task"))["lease"]["token"]
        await call(ann, "update_task", task_key="a", action="release", lease_token=token)
    async with mcp_client(db_url, workspace, "bob") as bob:
        await call(bob, "claim_task")
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "record_progress", summary="released a: blocked on a key", task_key="a")


async def test_the_last_attempt_says_so_in_every_lease(db_url, workspace):
    async with mcp_client(db_url, workspace, "planner") as planner:
        await call(planner, "add_tasks", tasks=[{"key": "a", "title": "A", "max_attempts": 2}])
    async with mcp_client(db_url, workspace, "ann") as ann:
        first = await call(ann, "claim_task", lease_seconds=10)
        assert "last_attempt" not in first["lease"], first["lease"]
        beat = await call(ann, "update_task", task_key="a", action="heartbeat", lease_token=first["lease"]["token"])
        assert "last_attempt" not in beat["lease"], beat
    clock.advance(11)
    async with mcp_client(db_url, workspace, "bob") as bob:
        second = await call(bob, "claim_task")
        assert second["lease"]["attempt"] == 2 and second["lease"]["last_attempt"] is True, second["lease"]
        token = second["lease"]["token"]
        beat = await call(bob, "update_task", task_key="a", action="heartbeat", lease_token=token)
        assert beat["lease"]["last_attempt"] is True, beat
        mine = (await call(bob, "restore_state"))["my_tasks"][0]
        assert mine["lease"]["last_attempt"] is True, mine
