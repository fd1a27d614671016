"""What an agent reads is never stale: a message with a `task_key` stops reaching readers that have not
acknowledged it once that task's status has changed after the message was sent; a `*` message about no
task reaches readers for 24 hours. `message read`, `restore_state`'s inbox, a claim's and a heartbeat's
`inbox.unread`, the CLI's `msg list`, the console's count and the hooks' glance all agree (the rule's one
home is the store's `live_messages` view)."""

from __future__ import annotations

import json
import re

import anyio
import pytest
from support import call, mcp_client, run_cli, settings_for

from mcp_harness import clock
from mcp_harness import quick_read as glance
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.service import Harness, Identity
from mcp_harness.store.migrations import MIGRATIONS_DIR
from mcp_harness.store.named import sql_files
from mcp_harness.tasks.rules import STATUS_EVENTS

pytestmark = pytest.mark.anyio


async def _unread(db_url: str, workspace: str, agent: str) -> dict[str, int | None]:
    """How many unread messages each reading says `agent` has."""
    async with mcp_client(db_url, workspace, agent) as client:
        read = await call(client, "message", action="read")
        restored = await call(client, "restore_state")
        claimed = await call(client, "claim_task", task_key="work")
        beat = await call(
            client, "update_task", task_key="work", action="heartbeat", lease_token=claimed["lease"]["token"]
        )
        await call(client, "update_task", task_key="work", action="release", lease_token=claimed["lease"]["token"])
    return {
        "read": read["unread"],
        "listed": len(read["messages"]),
        "restore": (restored.get("inbox") or {}).get("unread", 0),
        "claim": (claimed.get("inbox") or {}).get("unread", 0),
        "heartbeat": (beat.get("inbox") or {}).get("unread", 0),
    }


def _all(n: int) -> dict[str, int | None]:
    return dict.fromkeys(("read", "listed", "restore", "claim", "heartbeat"), n)


async def _plan(db_url: str, workspace: str) -> None:
    """`work` (a task readers claim and release to see their counts) and the gate `ship` after `build`."""
    async with Harness.open(settings_for(db_url)) as h:
        tasks = [
            {"key": "work", "title": "W", "max_attempts": 50},
            {"key": "build", "title": "B"},
            {"key": "ship", "title": "S", "kind": "gate", "depends_on": ["build"]},
        ]
        await h.tasks.add(Identity(workspace, "planner"), AddTasksArgs(tasks=tasks))
        got = await h.tasks.claim(Identity(workspace, "ann"), ClaimTaskArgs(task_key="build"))
        assert got.lease is not None
        await h.tasks.update(
            Identity(workspace, "ann"),
            UpdateTaskArgs(task_key="build", action="complete", lease_token=got.lease.token, verification="built"),
        )


async def test_a_broadcast_about_a_gate_stops_once_the_gate_is_decided(db_url, workspace):
    await _plan(db_url, workspace)
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "message", action="send", to="*", task_key="ship", body="ship waits for your approval")
        await call(ann, "message", action="send", to="bob", task_key="ship", body="bob: look at ship")
        await call(ann, "message", action="send", to="operators", task_key="ship", body="please approve ship")
    assert await _unread(db_url, workspace, "bob") == _all(2)
    async with Harness.open(settings_for(db_url)) as h:
        assert (await h.console.needs(workspace)).messages == 1
        person = Identity(workspace, "olga", role="operator")
        assert (await h.messages.read(person)).unread == 2  # the operators' and every agent's
        await h.tasks.update(person, UpdateTaskArgs(task_key="ship", action="approve", comment="fine"))
        assert (await h.console.needs(workspace)).messages == 0
        assert (await h.messages.read(person)).unread == 0
    assert await _unread(db_url, workspace, "bob") == _all(0)
    assert await _unread(db_url, workspace, "cy") == _all(0)  # a newcomer never sees it as news
    async with mcp_client(db_url, workspace, "bob") as bob:  # the history still has them, unread
        history = await call(bob, "message", action="read", unread_only=False)
    assert sorted(m["body"] for m in history["messages"]) == ["bob: look at ship", "ship waits for your approval"]
    assert not any(m["read"] for m in history["messages"]), history


async def test_a_message_sent_after_the_change_still_reaches(db_url, workspace):
    await _plan(db_url, workspace)
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.update(
            Identity(workspace, "olga", role="operator"), UpdateTaskArgs(task_key="ship", action="approve")
        )
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "message", action="send", to="*", task_key="ship", body="ship is approved: go")
    assert await _unread(db_url, workspace, "bob") == _all(1)
    async with mcp_client(db_url, workspace, "ann") as ann:  # a heartbeat changes no status
        claimed = await call(ann, "claim_task", task_key="build", lease_seconds=60)
    assert claimed["task"] is None  # done: nothing changed
    assert await _unread(db_url, workspace, "bob") == _all(1)


async def test_a_broadcast_about_no_task_reaches_readers_for_a_day(db_url, workspace):
    await _plan(db_url, workspace)
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "message", action="send", to="*", body="the CI is red until noon")
    clock.advance(23 * 3600)
    assert await _unread(db_url, workspace, "bob") == _all(1)
    clock.advance(3600 + 1)
    assert await _unread(db_url, workspace, "bob") == _all(0)


async def test_the_hooks_glance_agrees(db_url, workspace):
    await _plan(db_url, workspace)
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "message", action="send", to="bob", task_key="ship", body="about ship")
        await call(ann, "message", action="send", to="bob", body="about nothing")
    notes, _last = await anyio.to_thread.run_sync(glance.read_messages, db_url, workspace, "bob", 0)
    assert sorted(n.body for n in notes) == ["about nothing", "about ship"]
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.update(
            Identity(workspace, "olga", role="operator"),
            UpdateTaskArgs(task_key="ship", action="reject", comment="not yet"),
        )
    notes, _last = await anyio.to_thread.run_sync(glance.read_messages, db_url, workspace, "bob", 0)
    assert [n.body for n in notes] == ["about nothing"]


@pytest.mark.slow
async def test_the_clis_msg_list_agrees(db_url, workspace):
    await _plan(db_url, workspace)
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "message", action="send", to="operators", task_key="ship", body="please approve ship")
        await call(ann, "message", action="send", to="operators", body="hello")
    where = ("--db", db_url, "--workspace", workspace, "--agent", "olga")
    listed = json.loads(run_cli("msg", "list", "--json", *where).stdout)
    assert sorted(m["body"] for m in listed["messages"]) == ["hello", "please approve ship"], listed
    done = run_cli("review", "approve", "ship", *where)
    assert done.returncode == 0, done.stderr
    listed = json.loads(run_cli("msg", "list", "--json", *where).stdout)
    assert [m["body"] for m in listed["messages"]] == ["hello"] and listed["unread"] == 1, listed


def test_the_view_names_the_kinds_that_change_a_status():
    """The view's kinds are `tasks.rules.STATUS_EVENTS`, in the migration and in the declared schema."""
    for source in [*MIGRATIONS_DIR.glob("*live_messages*.sql"), sql_files()["message_views"]]:
        (listed,) = re.findall(r"e\.kind IN \(([^)]*)\)", source.read_text())
        assert set(re.findall(r"'(\w+)'", listed)) == STATUS_EVENTS, source
