"""A restored checkpoint says how much the log holds that it does not: `behind: {progress, task_changes}`
(entries and task events written since it was saved; absent when both are 0), and the instructions say
the log wins over an older state. Through the official MCP client on SQLite and PostgreSQL."""

from __future__ import annotations

from contextlib import asynccontextmanager

import pytest
from mcp import Client
from support import call, mcp_client, settings_for

from mcp_harness.arguments import RecordProgressArgs, RestoreStateArgs, SaveCheckpointArgs
from mcp_harness.checkpoints.service import BEHIND_CAP
from mcp_harness.mcp.server import INSTRUCTIONS, create_server
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def operator(url: str, workspace: str):
    server = create_server(settings_for(url), Identity(workspace, "olga", "operator"))
    async with Client(server, raise_exceptions=False) as client:
        yield client


async def test_a_restored_checkpoint_says_what_was_written_since(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="a") as a, operator(db_url, workspace) as olga:
        await call(a, "record_progress", summary="before the save")
        await call(a, "add_tasks", tasks=[{"key": "x", "title": "X", "review": True}])
        await call(a, "save_checkpoint", state={"phase": "build", "x": "in_review (2nd time)"})
        fresh = await call(a, "restore_state")
        assert fresh["checkpoint"]["version"] == 1 and "behind" not in fresh["checkpoint"], fresh["checkpoint"]

        got = await call(a, "claim_task", task_key="x")  # a claim event
        await call(
            a, "update_task", task_key="x", action="complete", lease_token=got["lease"]["token"], verification="tested"
        )  # a submit event
        await call(olga, "update_task", task_key="x", action="approve", comment="fine")  # an event and an entry
        await call(a, "record_progress", summary="after the save", task_key="x")
        later = await call(a, "restore_state")
        assert later["checkpoint"]["behind"] == {"progress": 2, "task_changes": 3}, later["checkpoint"]
        assert later["state"] == {"phase": "build", "x": "in_review (2nd time)"}, "the state is as saved"

        await call(a, "save_checkpoint", state={"phase": "ship"})
        assert "behind" not in (await call(a, "restore_state"))["checkpoint"]
        assert (await call(a, "restore_state", version=1))["checkpoint"]["behind"] == {"progress": 2, "task_changes": 3}


async def test_behind_is_counted_up_to_its_cap(db_url, workspace):
    me = Identity(workspace, "a")
    async with Harness.open(settings_for(db_url)) as h:
        await h.checkpoints.save(me, SaveCheckpointArgs(state={"a": 1}))
        for i in range(BEHIND_CAP + 5):
            await h.progress.record(me, RecordProgressArgs(summary=f"entry {i}"))
        got = await h.restore(me, RestoreStateArgs())
        assert got.checkpoint.behind.progress == BEHIND_CAP and got.checkpoint.behind.task_changes == 0


def test_the_instructions_say_the_log_wins():
    assert "the log wins over an older state" in INSTRUCTIONS["agent"]


def test_the_resume_brief_says_the_state_is_behind_the_log():
    from mcp_harness.cli.brief import _state

    meta = {"version": 3, "created_at": "2026-12-03T10:00:00Z", "agent": "a", "size_bytes": 12}
    restored = {"checkpoint": meta, "state": {"phase": "review"}}
    assert "since then" not in _state(restored, 1000)
    told = _state({**restored, "checkpoint": {**meta, "behind": {"progress": 4, "task_changes": 2}}}, 1000)
    assert "since then 4 progress entries and 2 task changes (where they differ, the log wins)" in told
