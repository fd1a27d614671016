"""What task answers carry (contract revision 3), through the official MCP client on SQLite and PostgreSQL:
replays that show the task as it stands now, the claim reasons that stop a wait loop, and lean answers
(task objects without defaults, compact action answers, list_tasks of open tasks, one task in full)."""

from __future__ import annotations

import json
import time
from contextlib import asynccontextmanager

import pytest
from support import call, fail, mcp_client, run_cli, settings_for

from mcp_harness import clock
from mcp_harness.jsonvalue import iso
from mcp_harness.mcp.server import create_server
from mcp_harness.service import Identity

pytestmark = pytest.mark.anyio


def t(key: str, **kw) -> dict:
    return {"key": key, "title": kw.pop("title", f"task {key}"), **kw}


@asynccontextmanager
async def operator(url: str, workspace: str):
    from mcp import Client

    server = create_server(settings_for(url), Identity(workspace, "ann", "operator"))
    async with Client(server, raise_exceptions=False) as client:
        yield client


async def full(client, key: str) -> dict:
    return (await call(client, "list_tasks", task_key=key))["tasks"][0]


# -- 1. replays ---------------------------------------------------------------------------------------
async def test_a_replayed_claim_shows_the_task_now_and_its_dead_lease_as_not_live(client):
    """The issue's case: session 2 reuses session 1's key after the task was done; the stale answer said
    `claimed` with a lease of 900 s."""
    await call(client, "add_tasks", tasks=[t("a"), t("b", depends_on=["a"])])
    first = await call(client, "claim_task", idempotency_key="claim-1")
    token = first["lease"]["token"]
    assert "live" not in first["lease"]
    live = await call(client, "claim_task", idempotency_key="claim-1")
    assert live["replayed"] is True and live["task"]["status"] == "claimed" and "live" not in live["lease"]
    await call(client, "update_task", task_key="a", action="complete", lease_token=token, verification="ok")
    again = await call(client, "claim_task", idempotency_key="claim-1")
    assert again["replayed"] is True and again["task"]["key"] == "a"
    assert again["task"]["status"] == "done", "the task's status now, not the stored one"
    assert again["lease"]["live"] is False and again["lease"]["token"] == token


@pytest.mark.parametrize("end", ["release", "complete"])
async def test_a_replayed_dead_lease_says_no_time_is_left(client, end):
    """A lease that ended (released, completed) and is answered again: `live: false` with 0 seconds left
    and an `expires_at` no later than the replay (it ended by then; the stored 900 s ahead read as time
    left); the stale copy said 900 s, time the caller does not have. The same for a replayed heartbeat."""
    await call(client, "add_tasks", tasks=[t("a")])
    first = await call(client, "claim_task", task_key="a", idempotency_key="claim-a")
    token = first["lease"]["token"]
    beat = await call(client, "update_task", task_key="a", action="heartbeat", lease_token=token, idempotency_key="b")
    assert first["lease"]["expires_in_seconds"] == 900 and beat["lease"]["expires_in_seconds"] == 900
    ending = {"verification": "pytest passed"} if end == "complete" else {"reason": "out of time"}
    await call(client, "update_task", task_key="a", action=end, lease_token=token, **ending)
    again = await call(client, "claim_task", task_key="a", idempotency_key="claim-a")
    assert again["replayed"] is True and again["task"]["status"] == ("done" if end == "complete" else "pending")
    replayed_at = iso(time.time())
    assert again["lease"]["expires_at"] <= replayed_at < first["lease"]["expires_at"]  # ended by now
    assert again["lease"] == {
        **first["lease"],
        "expires_in_seconds": 0,
        "live": False,
        "expires_at": again["lease"]["expires_at"],
    }
    beat_again = await call(
        client, "update_task", task_key="a", action="heartbeat", lease_token=token, idempotency_key="b"
    )
    assert beat_again["lease"]["expires_at"] <= iso(time.time()) < beat["lease"]["expires_at"]
    assert beat_again["lease"] == {
        **beat["lease"],
        "expires_in_seconds": 0,
        "live": False,
        "expires_at": beat_again["lease"]["expires_at"],
    }


async def test_a_replayed_claim_after_a_take_over_and_after_expiry(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="A") as a, mcp_client(db_url, workspace, agent="B") as b:
        await call(a, "add_tasks", tasks=[t("job")])
        await call(a, "claim_task", lease_seconds=10, idempotency_key="k")
        clock.advance(11)
        expired = await call(a, "claim_task", lease_seconds=10, idempotency_key="k")
        assert expired["lease"]["expired"] is True and expired["lease"]["live"] is False
        await call(b, "claim_task")
        taken = await call(a, "claim_task", lease_seconds=10, idempotency_key="k")
        assert taken["task"]["status"] == "claimed" and taken["lease"]["live"] is False


async def test_a_replayed_update_shows_the_status_now(db_url, workspace):
    async with mcp_client(db_url, workspace) as agent, operator(db_url, workspace) as ann:
        await call(agent, "add_tasks", tasks=[t("a")])
        got = await call(agent, "claim_task")
        token = got["lease"]["token"]
        beat = await call(
            agent, "update_task", task_key="a", action="heartbeat", lease_token=token, idempotency_key="h"
        )
        done = await call(
            agent,
            "update_task",
            task_key="a",
            action="complete",
            lease_token=token,
            verification="ok",
            idempotency_key="u",
        )
        assert done == {"key": "a", "status": "done", "last_error": None, "unblocked": []}
        await call(ann, "update_task", task_key="a", action="reopen", reason="it regressed")
        again = await call(
            agent,
            "update_task",
            task_key="a",
            action="complete",
            lease_token=token,
            verification="ok",
            idempotency_key="u",
        )
        assert again == {**done, "status": "pending", "replayed": True}
        beat_again = await call(
            agent, "update_task", task_key="a", action="heartbeat", lease_token=token, idempotency_key="h"
        )
        assert beat_again["lease"]["live"] is False and beat_again["lease"]["token"] == beat["lease"]["token"]
        assert (await full(agent, "a"))["status"] == "pending", "a replay changes nothing"


# -- 2. claim reasons ---------------------------------------------------------------------------------
async def test_waiting_on_other_work_instead_of_a_wait_loop(client):
    """The issue's case: the frontend task waits on a backend task nobody holds; claiming with
    tags=["frontend"] said all_claimed with retry_after 0, and waiting never changed it."""
    await call(
        client, "add_tasks", tasks=[t("api", tags=["backend"]), t("page", tags=["frontend"], depends_on=["api"])]
    )
    got = await call(client, "claim_task", tags=["frontend"])
    assert got["task"] is None and got["reason"] == "waiting_on_other_work" and got["retry_after"] is None
    assert got["waiting_on"] == [{"key": "api", "status": "pending", "owner": None, "retry_after": None}]
    by_key = await call(client, "claim_task", task_key="page")
    assert by_key["reason"] == "waiting_on_other_work" and [w["key"] for w in by_key["waiting_on"]] == ["api"]
    # someone holds it: all_claimed comes first, and says when the lease ends
    api = await call(client, "claim_task", tags=["backend"], lease_seconds=60)
    held = await call(client, "claim_task", tags=["frontend"])
    assert held["reason"] == "all_claimed" and 59 < held["retry_after"] <= 60
    assert held["waiting_on"] == [
        {
            "key": "api",
            "status": "claimed",
            "owner": "agent-a",
            "retry_after": held["retry_after"],
            "mine": True,
            "silent_seconds": 0,
            "alive": None,
        }
    ]
    # a lease that ran out, outside the call's tags, is nobody's: other work again
    clock.advance(61)
    assert (await call(client, "claim_task", tags=["frontend"]))["reason"] == "waiting_on_other_work"
    await call(
        client, "update_task", task_key="api", action="complete", lease_token=api["lease"]["token"], verification="ok"
    )
    assert (await call(client, "claim_task", tags=["frontend"]))["task"]["key"] == "page"


async def test_the_precedence_of_reasons_over_the_roots(db_url, workspace):
    """backoff, all_claimed, waiting_on_other_work, waiting_on_review, blocked_by_failure: the first
    that applies to any root wins."""
    async with mcp_client(db_url, workspace, agent="B") as b, operator(db_url, workspace) as ann:
        plan = [
            t("free"),
            t("review", review=True),
            t("bad", max_attempts=1),
            t("mine"),
            t("w", tags=["w"], depends_on=["free", "review", "bad", "mine"]),
        ]
        await call(b, "add_tasks", tasks=plan)
        for key in ("review", "bad"):
            got = await call(b, "claim_task", task_key=key)
            if key == "review":
                await call(
                    b,
                    "update_task",
                    task_key=key,
                    action="complete",
                    lease_token=got["lease"]["token"],
                    verification="v",
                )
            else:
                await call(b, "update_task", task_key=key, action="fail", lease_token=got["lease"]["token"], error="e")
        mine = await call(b, "claim_task", task_key="mine")
        assert (await call(b, "claim_task", tags=["w"]))["reason"] == "all_claimed"
        await call(
            b, "update_task", task_key="mine", action="complete", lease_token=mine["lease"]["token"], verification="v"
        )
        assert (await call(b, "claim_task", tags=["w"]))["reason"] == "waiting_on_other_work"
        free = await call(b, "claim_task", task_key="free")
        await call(
            b, "update_task", task_key="free", action="complete", lease_token=free["lease"]["token"], verification="v"
        )
        assert (await call(b, "claim_task", tags=["w"]))["reason"] == "waiting_on_review"
        await call(ann, "update_task", task_key="review", action="approve")
        assert (await call(b, "claim_task", tags=["w"]))["reason"] == "blocked_by_failure"


async def test_a_rejected_gate_says_its_comment_where_the_claim_waits(db_url, workspace):
    async with mcp_client(db_url, workspace) as agent, operator(db_url, workspace) as ann:
        await call(agent, "add_tasks", tasks=[t("go", kind="gate"), t("ship", depends_on=["go"])])
        await call(ann, "update_task", task_key="go", action="reject", comment="not before the audit")
        got = await call(agent, "claim_task")
        assert got["reason"] == "blocked_by_failure"
        assert got["waiting_on"] == [
            {"key": "go", "status": "failed", "owner": None, "retry_after": None, "comment": "not before the audit"}
        ]


async def test_tags_that_match_no_task_name_the_known_ones(client):
    await call(client, "add_tasks", tasks=[t(f"k{i}", tags=[f"tag{i:02}", "common"]) for i in range(25)])
    got = await call(client, "claim_task", tags=["fronted"])
    assert got["reason"] == "none_pending" and got["task"] is None
    assert got["known_tags"] == ["common", *(f"tag{i:02}" for i in range(19))], "at most 20, in order"
    assert "known_tags" not in await call(client, "claim_task", task_key="k1")  # a claim that took a task
    assert "known_tags" not in await call(client, "claim_task", tags=["tag01"])  # matched: all_claimed


# -- 3. lean answers ----------------------------------------------------------------------------------
async def test_task_objects_leave_out_defaults_and_unset_fields(client):
    await call(client, "add_tasks", tasks=[t("plain")])
    got = await call(client, "claim_task")
    task = got["task"]
    assert set(task) == {"key", "title", "status", "max_attempts", "created_at"}
    for absent in ("review", "kind", "priority", "steps", "depends_on", "tags", "description", "result"):
        assert absent not in task, absent
    # and what its lease says: the holder (the caller), the attempt, when it was taken
    assert got["lease"]["attempt"] == 1 and got["lease"]["token"]
    row = (await call(client, "list_tasks", task_key="plain"))["tasks"][0]
    assert row["owner"] == "agent-a" and row["attempts"] == 1 and row["updated_at"]


async def test_action_answers_are_compact(db_url, workspace):
    async with mcp_client(db_url, workspace) as agent, operator(db_url, workspace) as ann:
        await call(
            agent,
            "add_tasks",
            tasks=[
                t("a", steps=["x"], description="d"),
                t("b", depends_on=["a"]),
                t("c", max_attempts=3),
                t("r", review=True),
            ],
        )
        a = await call(agent, "claim_task", task_key="a")
        done = await call(
            agent,
            "update_task",
            task_key="a",
            action="complete",
            lease_token=a["lease"]["token"],
            verification="ok",
            result={"commit": "abc"},
        )
        assert done == {"key": "a", "status": "done", "last_error": None, "unblocked": ["b"]}
        c = await call(agent, "claim_task", task_key="c")
        back = await call(
            agent, "update_task", task_key="c", action="fail", lease_token=c["lease"]["token"], error="flaky"
        )
        assert set(back) == {"key", "status", "available_at"} and back["status"] == "pending"
        c = await call(agent, "claim_task", task_key="b")
        released = await call(agent, "update_task", task_key="b", action="release", lease_token=c["lease"]["token"])
        assert released == {"key": "b", "status": "pending", "attempts": 0}
        reopened = await call(agent, "update_task", task_key="a", action="reopen", reason="again")
        assert reopened == {
            "key": "a",
            "status": "pending",
            "attempts": 0,
            "result": None,
            "verification": None,
            "revoked": [],
        }
        r = await call(agent, "claim_task", task_key="r")
        await call(
            agent, "update_task", task_key="r", action="complete", lease_token=r["lease"]["token"], verification="v"
        )
        approved = await call(ann, "update_task", task_key="r", action="approve")
        assert approved == {"key": "r", "status": "done", "review_comment": None, "unblocked": []}
        cancelled = await call(ann, "update_task", task_key="c", action="cancel", reason="not needed")
        assert cancelled == {"key": "c", "status": "cancelled", "unblocked": []}


async def test_list_tasks_lists_open_tasks_and_counts_everything(db_url, workspace):
    async with mcp_client(db_url, workspace) as agent, operator(db_url, workspace) as ann:
        await call(
            agent,
            "add_tasks",
            tasks=[t("done"), t("gone"), t("open", priority=2, tags=["x"]), t("later", depends_on=["open"])],
        )
        got = await call(agent, "claim_task", task_key="done")
        await call(
            agent,
            "update_task",
            task_key="done",
            action="complete",
            lease_token=got["lease"]["token"],
            verification="v",
        )
        await call(ann, "update_task", task_key="gone", action="cancel", reason="r")
        listed = await call(agent, "list_tasks")
        assert listed["tasks"] == [
            {"key": "open", "title": "task open", "status": "pending", "ready": True, "priority": 2},
            {"key": "later", "title": "task later", "status": "pending", "ready": False, "depends_on": ["open"]},
        ]
        assert listed["counts"] == {"pending": 2, "done": 1, "cancelled": 1}
        every = await call(agent, "list_tasks", status=["done", "cancelled", "pending"])
        assert [r["key"] for r in every["tasks"]] == ["done", "gone", "open", "later"]
        done = (await call(agent, "list_tasks", status="done"))["tasks"][0]
        assert done == {
            "key": "done",
            "title": "task done",
            "status": "done",
            "ready": False,
            "owner": "agent-a",
            "attempts": 1,
        }


async def test_list_tasks_task_key_answers_one_task_in_full(client):
    await call(client, "add_tasks", tasks=[t("a", description="the whole text", steps=["s"], tags=["x"])])
    got = await call(client, "claim_task")
    await call(
        client,
        "update_task",
        task_key="a",
        action="complete",
        lease_token=got["lease"]["token"],
        verification="ran it",
        result={"commit": "abc", "notes": "n" * 500},
    )
    listed = await call(client, "list_tasks", task_key="a")
    (row,) = listed["tasks"]
    assert row["status"] == "done" and row["ready"] is False and row["result"] == {"commit": "abc", "notes": "n" * 500}
    assert row["description"] == "the whole text" and row["verification"] == "ran it" and row["tags"] == ["x"]
    assert listed["counts"] == {"done": 1} and listed["next_cursor"] is None
    err = await fail(client, "list_tasks", task_key="ghost")
    assert err.code == "not_found" and "'ghost'" in err.text


async def test_the_output_schemas_describe_both_shapes(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    update = tools["update_task"].output_schema
    assert {"key", "status", "lease", "attempts", "available_at", "unblocked", "revoked"} <= set(update["properties"])
    assert "{key, status} plus what changed" in update["description"]
    listed = tools["list_tasks"].output_schema
    assert len(listed["properties"]["tasks"]["items"]["anyOf"]) == 2, "rows, or one task in full"
    claim = tools["claim_task"].output_schema
    assert "waiting_on_other_work" in json.dumps(claim) and "known_tags" in claim["properties"]


@pytest.mark.slow  # runs the command line
async def test_people_keep_every_field_in_the_cli_json(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace) as agent:
        await call(agent, "add_tasks", tasks=[t("a"), t("b")])
        await call(agent, "claim_task", task_key="a")
    db = sqlite_url.split("///", 1)[1]
    board = json.loads(run_cli("tasks", "--db", db, "--workspace", workspace, "--json").stdout)
    row = next(r for r in board["tasks"] if r["key"] == "b")
    assert row["review"] is False and row["kind"] == "work" and row["owner"] is None and row["tags"] == []
    out = run_cli("tasks", "release", "a", "--reason", "handing over", "--db", db, "--workspace", workspace, "--json")
    assert out.returncode == 0, out.stderr
    released = json.loads(out.stdout)
    assert released["status"] == "pending" and released["title"] == "task a" and released["owner"] is None
    assert released["priority"] == 0 and released["depends_on"] == []
