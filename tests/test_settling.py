"""A lease that ran out is settled when another call looks at the task (contract revision 3, "Details that
tests rely on"): a claim, a list (`list_tasks`, also of one task) or a restore (`restore_state`). Until then
its holder may still heartbeat or complete; on the last attempt, that settling fails the task, with its
`expire` event and the harness's note, blocks what depends on it, and the holder's late call is answered
`lease_lost` naming the way out. Through the official MCP client on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from support import call, fail, mcp_client, settings_for

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs
from mcp_harness.service import Harness
from mcp_harness.tasks.store import tasks as task_store

pytestmark = pytest.mark.anyio

PLAN = [
    {"key": "once", "title": "One try only", "max_attempts": 1},
    {"key": "after", "title": "Needs once", "depends_on": ["once"]},
    {"key": "other", "title": "Unrelated"},
]
NOTE = "task once failed: the lease of ann expired on its last attempt (1)"

#: each way another call looks at the tasks, and what it then shows of `once` and `after`
LOOKS = {
    "list_tasks": lambda c: call(c, "list_tasks", status=["claimed", "failed", "pending", "blocked"]),
    "list_tasks(task_key)": lambda c: call(c, "list_tasks", task_key="once"),
    "restore_state": lambda c: call(c, "restore_state"),
}


async def events(db_url: str, workspace: str, key: str) -> list[tuple[str, str, dict]]:
    async with Harness.open(settings_for(db_url)) as h, h.db.read() as conn:
        rows = await task_store.events(conn, workspace, key)
    return [(r.kind, r.actor, json.loads(r.detail) if r.detail else {}) for r in rows]


def statuses(answer: dict) -> dict[str, str]:
    return {row["key"]: row["status"] for row in answer["tasks"]}


async def notes(client) -> list[str]:
    entries = (await call(client, "restore_state", progress_limit=20))["recent_progress"]
    return [e["summary"] for e in entries if e["agent"] == "harness" and e.get("task_key") == "once"]


@pytest.mark.parametrize("look", LOOKS)
async def test_a_look_fails_a_task_whose_lease_ran_out_on_its_last_attempt(db_url, workspace, look):
    async with mcp_client(db_url, workspace, "ann") as ann, mcp_client(db_url, workspace, "bob") as bob:
        await call(ann, "add_tasks", tasks=PLAN)
        got = await call(ann, "claim_task", task_key="once", lease_seconds=10)
        clock.advance(11)

        seen = await LOOKS[look](bob)
        if look == "restore_state":
            assert seen["task_counts"] == {"pending": 1, "failed": 1, "blocked": 1}, seen["task_counts"]
        elif look == "list_tasks":
            assert statuses(seen) == {"once": "failed", "after": "blocked", "other": "pending"}
            assert seen["counts"] == {"pending": 1, "failed": 1, "blocked": 1}
        else:
            (row,) = seen["tasks"]
            assert row["status"] == "failed" and row["last_error"] == "the lease expired on the last allowed attempt"
            assert "owner" not in row or row["owner"] == "ann"
            assert seen["counts"] == {"pending": 1, "failed": 1, "blocked": 1}

        # the event and the note, once: a second look settles nothing more
        await LOOKS[look](bob)
        assert [(k, actor) for k, actor, _d in await events(db_url, workspace, "once")] == [
            ("claim", "ann"),
            ("expire", "ann"),
        ]
        assert await notes(bob) == [NOTE]
        # what depends on it is blocked, and a claim says why
        nothing = await call(bob, "claim_task", task_key="after")
        assert nothing["task"] is None and nothing["reason"] == "blocked_by_failure"
        assert [w["key"] for w in nothing["waiting_on"]] == ["once"]
        # the holder's late complete: lease_lost, naming the way out
        err = await fail(
            ann,
            "update_task",
            task_key="once",
            action="complete",
            lease_token=got["lease"]["token"],
            verification="pytest passed",
        )
        assert err.code == "lease_lost", err.text
        assert "the lease expired on the last attempt and the task failed" in err.text, err.text
        assert "action='reopen'" in err.text and "claim_task(task_key='once')" in err.text, err.text
        assert err.text.index("reopen") < err.text.index("claim_task(") < err.text.index("complete with")


async def test_until_a_look_the_holder_may_still_heartbeat_and_complete(db_url, workspace):
    """Settling waits for another call: a lease that ran out on the last attempt still lets its holder
    heartbeat (reviving it) and complete, as long as no claim, list or restore looked in between."""
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "add_tasks", tasks=PLAN)
        got = await call(ann, "claim_task", task_key="once", lease_seconds=10)
        token = got["lease"]["token"]
        clock.advance(11)
        beat = await call(ann, "update_task", task_key="once", action="heartbeat", lease_token=token)
        assert beat["lease"]["expires_in_seconds"] == 10 and "expired" not in beat["lease"]
        listed = await call(ann, "list_tasks")
        assert statuses(listed)["once"] == "claimed", "a live lease is left alone"
        clock.advance(11)
        done = await call(
            ann, "update_task", task_key="once", action="complete", lease_token=token, verification="pytest passed"
        )
        assert done["status"] == "done" and done["unblocked"] == ["after"]


async def test_a_lease_that_ran_out_with_attempts_left_is_left_for_a_claim(db_url, workspace):
    """Only the last attempt is settled by a look: with attempts left, the task stays claimed (shown with
    its expired lease) until a claim takes it over, and its holder may still complete it."""
    async with mcp_client(db_url, workspace, "ann") as ann, mcp_client(db_url, workspace, "bob") as bob:
        await call(ann, "add_tasks", tasks=[{"key": "twice", "title": "Two tries", "max_attempts": 2}])
        got = await call(ann, "claim_task", lease_seconds=10)
        clock.advance(11)
        assert statuses(await call(bob, "list_tasks")) == {"twice": "claimed"}
        held = (await call(ann, "restore_state"))["my_tasks"]
        assert held[0]["key"] == "twice" and held[0]["lease"]["expired"] is True
        assert [k for k, _a, _d in await events(db_url, workspace, "twice")] == ["claim"]
        done = await call(
            ann,
            "update_task",
            task_key="twice",
            action="complete",
            lease_token=got["lease"]["token"],
            verification="pytest passed",
        )
        assert done["status"] == "done"


@pytest.mark.slow  # builds 2,000 tasks
async def test_the_probe_reads_its_partial_index(harness, workspace):
    """The look's probe (a lease that ran out on the last attempt?) rides on the counts' statement and
    reads `ix_task_last_lease`, which holds only claimed tasks on their last attempt: no scan of the
    workspace's tasks, whatever its size."""
    from mcp_harness.models import TaskSpec
    from mcp_harness.service import Identity
    from mcp_harness.store.connection import Query
    from mcp_harness.tasks.store.tasks import Q as queries

    ident = Identity(workspace, "a")
    for start in range(0, 2000, 500):
        await harness.tasks.add(
            ident, AddTasksArgs(tasks=[TaskSpec(key=f"t{i}", title="t") for i in range(start, start + 500)])
        )
    async with harness.db.read() as conn:
        sql = queries.task_counts_ran_out.sqlite.replace(":ws", f"'{workspace}'").replace(":now", "1e12")
        if conn.dialect == "postgresql":
            plan = "\n".join(r[0] for r in await conn.fetch_all(Query("EXPLAIN " + sql)))
            assert "ix_task_last_lease" in plan and "Seq Scan on tasks" not in plan, plan
        else:
            plan = "\n".join(r[-1] for r in await conn.fetch_all(Query("EXPLAIN QUERY PLAN " + sql)))
            assert "ix_task_last_lease" in plan and "SCAN tasks" not in plan, plan
