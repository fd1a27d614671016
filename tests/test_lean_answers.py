"""Leaner answers (contract revision 3), the parts outside task objects: timestamps to the second,
progress entries without `thread: "main"`, `status: "note"` or unset fields, counts without zero buckets, and
`restore_state` saying who the caller is."""

from __future__ import annotations

import json
import re

import pytest
from support import call, fail, mcp_client

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, RecordProgressArgs

pytestmark = pytest.mark.anyio

SECOND = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


async def test_every_timestamp_in_a_result_is_to_the_second(client):
    saved = await call(client, "save_checkpoint", state={"a": 1})
    logged = await call(client, "record_progress", summary="s")
    await call(client, "add_tasks", tasks=[{"key": "t", "title": "T"}])
    claimed = await call(client, "claim_task")
    listed = await call(client, "list_checkpoints")
    brief = await call(client, "restore_state")
    beat = await call(client, "update_task", task_key="t", action="heartbeat", lease_token=claimed["lease"]["token"])
    stamps = [
        saved["created_at"],
        logged["created_at"],
        claimed["lease"]["expires_at"],
        claimed["task"]["created_at"],
        listed["checkpoints"][0]["created_at"],
        brief["checkpoint"]["created_at"],
        brief["recent_progress"][0]["created_at"],
        brief["my_tasks"][0]["lease"]["expires_at"],
        beat["lease"]["expires_at"],
    ]
    assert all(SECOND.match(s) for s in stamps), stamps
    # and the seconds a lease has left are whole (a claim answers at its own moment: all 900)
    left = [claimed["lease"]["expires_in_seconds"], brief["my_tasks"][0]["lease"]["expires_in_seconds"]]
    assert all(isinstance(n, int) for n in left) and left[0] == 900 and 0 < left[1] <= 900, left


async def test_progress_entries_leave_out_main_note_and_unset_fields(client):
    """`thread` when it is `main`, `status` when it is `note` (record_progress's default) and unset fields
    are left out of results; a person's view (the CLI's --json) keeps every field."""
    await call(client, "add_tasks", tasks=[{"key": "t", "title": "T"}])
    await call(client, "record_progress", summary="plain", task_key="t")
    await call(client, "record_progress", summary="tagged", thread="docs", details="d", status="done")
    entries = (await call(client, "restore_state"))["recent_progress"]
    assert entries[0] == {
        "seq": 2,
        "created_at": entries[0]["created_at"],
        "agent": "agent-a",
        "thread": "docs",
        "status": "done",
        "summary": "tagged",
        "details": "d",
    }
    assert entries[1] == {
        "seq": 1,
        "created_at": entries[1]["created_at"],
        "agent": "agent-a",
        "summary": "plain",
        "task_key": "t",
    }
    resource = json.loads((await client.read_resource("harness://progress")).contents[0].text)["progress"]
    assert "thread" not in resource[1] and "details" not in resource[1] and resource[0]["thread"] == "docs"
    assert "status" not in resource[1] and resource[0]["status"] == "done"


async def test_a_persons_view_of_progress_keeps_every_field(harness, workspace):
    """`tasks show KEY --json` dumps the story with `EVERY_FIELD`: its entries name the thread and status."""
    from mcp_harness.models import EVERY_FIELD, TaskSpec
    from mcp_harness.service import Identity

    ann = Identity(workspace, "ann")
    await harness.tasks.add(ann, AddTasksArgs(tasks=[TaskSpec(key="t", title="T")]))
    await harness.progress.record(ann, RecordProgressArgs(summary="plain", task_key="t"))
    story = (await harness.tasks.story(ann, "t")).model_dump(mode="json", context=EVERY_FIELD)
    (entry,) = story["progress"]
    assert entry["thread"] == "main" and entry["status"] == "note" and entry["details"] is None


async def test_counts_leave_out_zero_buckets(client):
    brief = await call(client, "restore_state")
    assert brief["task_counts"] == {} and brief["my_tasks"] == []  # other fields stay as before
    await call(client, "add_tasks", tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B"}])
    await call(client, "claim_task", task_key="a")
    assert (await call(client, "list_tasks"))["counts"] == {"pending": 1, "claimed": 1}
    assert (await call(client, "restore_state"))["task_counts"] == {"pending": 1, "claimed": 1}


async def test_restore_state_says_who_the_connection_is(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="claude-code:1a2b3c4d") as agent:
        assert (await call(agent, "restore_state"))["you"] == {"agent": "claude-code:1a2b3c4d", "role": "agent"}


async def test_a_name_published_without_its_pattern_is_still_checked(client):
    """Names that refer to existing things are published as plain strings (the pattern cost every
    session ~350 bytes); the server still refuses a malformed one, naming the pattern."""
    for tool, args in (
        ("claim_task", {"task_key": "bad key"}),
        ("restore_state", {"thread": "bad thread"}),
        ("record_progress", {"summary": "s", "task_key": "bad key"}),
    ):
        err = await fail(client, tool, **args)
        assert err.code == "invalid_argument" and "pattern" in err.text, (tool, err.text)


async def test_an_expired_lease_of_the_caller_gets_no_warning(client):
    """The `done` warning is about a lease still live: once it ran out, completing is no longer the advice."""
    await call(client, "add_tasks", tasks=[{"key": "t", "title": "T"}])
    await call(client, "claim_task", task_key="t", lease_seconds=10)
    clock.advance(60)
    assert "warning" not in await call(client, "record_progress", summary="t done", status="done", task_key="t")
