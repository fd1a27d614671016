"""The shared task list through the official MCP client, on SQLite and PostgreSQL."""

from __future__ import annotations

import anyio
import pytest
from support import call, fail, mcp_client

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs

pytestmark = pytest.mark.anyio


def t(key: str, **kw) -> dict:
    return {"key": key, "title": kw.pop("title", f"task {key}"), **kw}


async def claim(client, **kw) -> dict:
    return await call(client, "claim_task", **kw)


async def row(client, key: str) -> dict:
    """The task's full row (`list_tasks(task_key=K)`): action answers are compact (revision 3)."""
    return (await call(client, "list_tasks", task_key=key))["tasks"][0]


async def complete(client, task_key: str, token: str, **kw) -> dict:
    return await call(
        client, "update_task", task_key=task_key, action="complete", lease_token=token, verification="tested", **kw
    )


async def test_add_is_idempotent_and_never_edits(client):
    first = await call(client, "add_tasks", tasks=[t("a", steps=["open page", "see title"]), t("b")])
    assert first == {"created": ["a", "b"], "unchanged": []}
    again = await call(client, "add_tasks", tasks=[t("a", steps=["open page", "see title"]), t("c")])
    assert again == {"created": ["c"], "unchanged": ["a"]}
    err = await fail(client, "add_tasks", tasks=[t("a", title="something else")])
    assert err.code == "task_conflict" and "'a'" in err.text and "new key" in err.text and "reopen" not in err.text
    err = await fail(client, "add_tasks", tasks=[t("d"), t("d")])
    assert err.code == "invalid_argument" and "appears twice" in err.text
    listing = await call(client, "list_tasks")
    assert [r["key"] for r in listing["tasks"]] == ["a", "b", "c"]


async def test_dependency_errors_store_nothing(client):
    err = await fail(client, "add_tasks", tasks=[t("a", depends_on=["ghost"])])
    assert err.code == "dependency_error" and "'ghost'" in err.text
    err = await fail(
        client, "add_tasks", tasks=[t("a", depends_on=["c"]), t("b", depends_on=["a"]), t("c", depends_on=["b"])]
    )
    assert err.code == "dependency_error" and "cycle" in err.text
    err = await fail(client, "add_tasks", tasks=[t("self", depends_on=["self"])])
    assert err.code == "dependency_error" and "cycle" in err.text
    assert (await call(client, "list_tasks"))["tasks"] == []


async def test_claim_order_priority_then_age(client):
    await call(client, "add_tasks", tasks=[t("low"), t("high", priority=5), t("low2"), t("mid", priority=1)])
    order = []
    for _ in range(4):
        got = await claim(client)
        order.append(got["task"]["key"])
    assert order == ["high", "mid", "low", "low2"]
    assert (await claim(client))["reason"] == "all_claimed"


async def test_dependencies_gate_claims(client):
    await call(client, "add_tasks", tasks=[t("build"), t("test", depends_on=["build"], priority=10)])
    got = await claim(client)
    assert got["task"]["key"] == "build"
    nothing = await claim(client)
    assert nothing["task"] is None and nothing["reason"] == "all_claimed"  # test waits on build, held
    assert [w["key"] for w in nothing["waiting_on"]] == ["build"] and nothing["waiting_on"][0]["owner"] == "agent-a"
    await complete(client, "build", got["lease"]["token"], result={"artifact": "app.whl"})
    nxt = await claim(client)
    assert nxt["task"]["key"] == "test" and nxt["task"]["depends_on"] == ["build"]
    await complete(client, "test", nxt["lease"]["token"])
    assert (await claim(client))["reason"] == "all_done"


async def test_failed_dependency_blocks_transitively_until_reopened(client):
    await call(client, "add_tasks", tasks=[t("a", max_attempts=1), t("b", depends_on=["a"]), t("c", depends_on=["b"])])
    got = await claim(client)
    failed = await call(
        client, "update_task", task_key="a", action="fail", lease_token=got["lease"]["token"], error="boom"
    )
    assert failed == {"key": "a", "status": "failed"}
    assert (await row(client, "a"))["last_error"] == "boom"
    listing = await call(client, "list_tasks")
    assert {r["key"]: r["status"] for r in listing["tasks"]} == {"a": "failed", "b": "blocked", "c": "blocked"}
    assert listing["counts"] == {"failed": 1, "blocked": 2}  # counts omit zero buckets (revision 3)
    nothing = await claim(client)
    assert nothing["reason"] == "blocked_by_failure" and nothing["retry_after"] is None
    assert nothing["waiting_on"] == [{"key": "a", "status": "failed", "owner": "agent-a", "retry_after": None}]
    blocked = await call(client, "list_tasks", status=["blocked"])
    assert [r["key"] for r in blocked["tasks"]] == ["b", "c"]
    reopened = await call(client, "update_task", task_key="a", action="reopen", reason="flaky network, retry")
    assert reopened["status"] == "pending" and reopened["attempts"] == 0
    counts = (await call(client, "list_tasks"))["counts"]
    assert counts == {"pending": 3}
    log = (await call(client, "restore_state"))["recent_progress"]
    assert log[0]["task_key"] == "a" and "flaky network, retry" in log[0]["summary"]


async def test_lease_expiry_fencing(db_url, workspace):
    """A claims with a short lease and stalls; B re-claims; A's heartbeat and complete get lease_lost."""
    async with mcp_client(db_url, workspace, agent="A") as a, mcp_client(db_url, workspace, agent="B") as b:
        await call(a, "add_tasks", tasks=[t("job")])
        first = await claim(a, lease_seconds=10)
        assert first["lease"]["attempt"] == 1
        assert (await claim(b))["reason"] == "all_claimed"
        clock.advance(11)
        second = await claim(b)
        assert second["task"]["key"] == "job" and second["lease"]["attempt"] == 2
        assert second["lease"]["token"] != first["lease"]["token"]
        for action in ("heartbeat", "complete", "release"):
            err = await fail(
                a, "update_task", task_key="job", action=action, lease_token=first["lease"]["token"], verification="x"
            )
            assert err.code == "lease_lost" and "'B'" in err.text, err.text
        done = await complete(b, "job", second["lease"]["token"])
        assert done == {"key": "job", "status": "done", "last_error": None, "unblocked": []}
        assert (await row(b, "job"))["owner"] == "B"
        # a retried complete by the lease that completed it answers the task unchanged (revision 2)
        again = await call(
            a,
            "update_task",
            task_key="job",
            action="complete",
            lease_token=second["lease"]["token"],
            verification="again",
        )
        assert again == done and (await row(a, "job"))["verification"] == "tested"
        err = await fail(
            a,
            "update_task",
            task_key="job",
            action="complete",
            lease_token=first["lease"]["token"],
            verification="again",
        )
        assert err.code == "lease_lost" and "done" in err.text and "'B' took the task over" in err.text


async def test_a_claim_merges_lapsed_leases_and_pending_tasks_in_claim_order(db_url, workspace):
    """A claim reads pending tasks and lapsed leases apart (two indexes) and takes the best of both: a
    lapsed lease of a higher priority comes before a lower pending task and after a higher one; a live
    lease and a lapsed one on its last attempt are never taken; ties go to the older task."""
    async with mcp_client(db_url, workspace, agent="A") as a, mcp_client(db_url, workspace, agent="B") as b:
        await call(
            a,
            "add_tasks",
            tasks=[
                t("live", priority=9),
                t("lapsed", priority=5),
                t("last", priority=8, max_attempts=1),
                t("top", priority=6),
                t("low", priority=1),
                t("tie", priority=5),
            ],
        )
        tokens = {}
        for key, lease in (("live", 600), ("last", 10), ("top", 10), ("lapsed", 10)):  # in claim order
            got = await claim(a, lease_seconds=lease)
            assert got["task"]["key"] == key
            tokens[key] = got["lease"]["token"]
        await call(a, "update_task", task_key="top", action="release", lease_token=tokens["top"], reason="later")
        clock.advance(11)  # top is pending again; lapsed and last ran out; live holds
        order = [(await claim(b, lease_seconds=600))["task"]["key"] for _ in range(4)]
        assert order == ["top", "lapsed", "tie", "low"], order
        assert (await claim(b))["reason"] == "all_claimed"


async def test_expired_uncontested_lease_may_still_finish(client):
    await call(client, "add_tasks", tasks=[t("slow")])
    got = await claim(client, lease_seconds=10)
    clock.advance(30)
    brief = await call(client, "restore_state")
    assert brief["my_tasks"][0]["key"] == "slow" and brief["my_tasks"][0]["lease"]["expired"] is True
    beat = await call(
        client, "update_task", task_key="slow", action="heartbeat", lease_token=got["lease"]["token"], lease_seconds=60
    )
    assert "expired" not in beat and "expired" not in beat["lease"] and beat["lease"]["expires_in_seconds"] == 60
    assert set(beat) == {"lease"}, "a heartbeat answers the lease only"
    done = await complete(client, "slow", got["lease"]["token"])
    assert done["status"] == "done" and (await row(client, "slow"))["verification"] == "tested"


async def test_fail_retries_with_backoff_then_fails(client):
    await call(client, "add_tasks", tasks=[t("flaky", max_attempts=2)])
    got = await claim(client)
    back = await call(
        client, "update_task", task_key="flaky", action="fail", lease_token=got["lease"]["token"], error="timeout"
    )
    assert back["status"] == "pending" and back["available_at"] is not None
    waiting = await claim(client)
    assert waiting["task"] is None and waiting["reason"] == "backoff"
    assert 4 < waiting["retry_after"] <= 5.0  # the default base delay is 5 s
    assert [(w["key"], w["status"]) for w in waiting["waiting_on"]] == [("flaky", "pending")]
    clock.advance(5.5)
    again = await claim(client)
    assert again["task"]["key"] == "flaky" and again["lease"]["attempt"] == 2
    final = await call(
        client,
        "update_task",
        task_key="flaky",
        action="fail",
        lease_token=again["lease"]["token"],
        error="timeout again",
    )
    assert final == {"key": "flaky", "status": "failed"} and (await row(client, "flaky"))["attempts"] == 2


async def test_fail_without_retry_and_release(client):
    await call(client, "add_tasks", tasks=[t("x"), t("y")])
    x = await claim(client, task_key="x")
    assert x["task"]["key"] == "x"
    out = await call(
        client,
        "update_task",
        task_key="x",
        action="fail",
        lease_token=x["lease"]["token"],
        error="impossible",
        retry=False,
    )
    assert out == {"key": "x", "status": "failed"} and (await row(client, "x"))["attempts"] == 1
    y = await claim(client, task_key="y")
    released = await call(client, "update_task", task_key="y", action="release", lease_token=y["lease"]["token"])
    assert released == {"key": "y", "status": "pending", "attempts": 0}
    assert "owner" not in await row(client, "y")
    y2 = await claim(client, task_key="y")
    assert y2["lease"]["attempt"] == 1


async def test_expired_lease_with_no_attempts_left_fails(client):
    await call(client, "add_tasks", tasks=[t("once", max_attempts=1), t("after", depends_on=["once"])])
    await claim(client, lease_seconds=10)
    clock.advance(20)
    nothing = await claim(client)
    assert nothing["task"] is None and nothing["reason"] == "blocked_by_failure"
    rows = {r["key"]: r["status"] for r in (await call(client, "list_tasks"))["tasks"]}
    assert rows == {"once": "failed", "after": "blocked"}


async def test_update_rules(client):
    await call(client, "add_tasks", tasks=[t("a")])
    got = await claim(client)
    token = got["lease"]["token"]
    err = await fail(client, "update_task", task_key="a", action="complete", lease_token=token)
    assert err.code == "invalid_argument" and "verification" in err.text
    err = await fail(client, "update_task", task_key="a", action="heartbeat")
    assert err.code == "invalid_argument" and "lease_token" in err.text
    err = await fail(client, "update_task", task_key="a", action="reopen", reason="r")
    assert err.code == "invalid_argument" and "claimed" in err.text
    err = await fail(client, "update_task", task_key="a", action="reopen")
    assert err.code == "invalid_argument" and "reason" in err.text
    err = await fail(client, "update_task", task_key="ghost", action="heartbeat", lease_token=token)
    assert err.code == "not_found" and "'ghost'" in err.text
    err = await fail(client, "claim_task", task_key="ghost")
    assert err.code == "not_found"
    err = await fail(client, "update_task", task_key="a", action="explode", lease_token=token)
    assert err.code == "invalid_argument" and err.text.startswith("[invalid_argument] action")
    err = await fail(client, "claim_task", lease_seconds=5)
    assert err.code == "invalid_argument" and "lease_seconds" in err.text
    err = await fail(client, "claim_task", wait_seconds=61)
    assert err.code == "invalid_argument" and "wait_seconds" in err.text


async def test_list_tasks_pages_and_filters(client):
    await call(client, "add_tasks", tasks=[t(f"k{i}", tags=["ui"] if i % 2 else ["api"]) for i in range(7)])
    page = await call(client, "list_tasks", limit=3)
    keys = [r["key"] for r in page["tasks"]]
    while page["next_cursor"]:
        page = await call(client, "list_tasks", limit=3, cursor=page["next_cursor"])
        keys += [r["key"] for r in page["tasks"]]
    assert keys == [f"k{i}" for i in range(7)]
    ui = await call(client, "list_tasks", tag="ui")
    assert [r["key"] for r in ui["tasks"]] == ["k1", "k3", "k5"]
    assert ui["counts"]["pending"] == 7  # counts cover the whole workspace
    got = await claim(client, tags=["api"])
    assert got["task"]["key"] == "k0" and got["task"]["tags"] == ["api"]
    err = await fail(client, "list_tasks", cursor="garbage!")
    assert err.code == "invalid_argument" and "cursor" in err.text
    err = await fail(client, "list_tasks", limit=501)
    assert err.code == "invalid_argument"


async def test_idempotent_claim_returns_the_same_lease(client):
    await call(client, "add_tasks", tasks=[t("a"), t("b")])
    first = await claim(client, idempotency_key="c1")
    again = await claim(client, idempotency_key="c1")
    # the lease as it stands now (still live: only the seconds left moved on)
    assert again["lease"]["expires_in_seconds"] <= first["lease"]["expires_in_seconds"]
    again["lease"]["expires_in_seconds"] = first["lease"]["expires_in_seconds"]
    assert again == {**first, "replayed": True}
    assert (await call(client, "list_tasks", status=["claimed"]))["counts"]["claimed"] == 1


async def test_racing_agents_one_winner(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="setup") as setup:
        await call(setup, "add_tasks", tasks=[t("only")])
    winners = []
    async with (
        mcp_client(db_url, workspace, agent="r1") as c1,
        mcp_client(db_url, workspace, agent="r2") as c2,
        mcp_client(db_url, workspace, agent="r3") as c3,
    ):

        async def race(client):
            got = await claim(client)
            if got["task"]:
                winners.append(got["task"]["key"])

        async with anyio.create_task_group() as tg:
            for c in (c1, c2, c3):
                tg.start_soon(race, c)
    assert winners == ["only"]


async def test_wait_seconds_wakes_when_work_arrives(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="w") as worker, mcp_client(db_url, workspace, agent="p") as producer:
        result = {}

        async def wait_for_work():
            result["claim"] = await claim(worker, wait_seconds=20)

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                tg.start_soon(wait_for_work)
                await anyio.sleep(0.5)
                assert "claim" not in result
                await call(producer, "add_tasks", tasks=[t("late")])
        assert result["claim"]["task"]["key"] == "late"


async def test_wait_seconds_times_out_with_reason(client):
    start = anyio.current_time()
    got = await claim(client, wait_seconds=0.6)
    assert got["task"] is None and got["reason"] == "none_pending"
    assert anyio.current_time() - start >= 0.55


async def test_reopening_a_dependency_revokes_claims_downstream(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="A") as a, mcp_client(db_url, workspace, agent="B") as b:
        await call(a, "add_tasks", tasks=[t("base"), t("top", depends_on=["base"])])
        base = await claim(a)
        await complete(a, "base", base["lease"]["token"])
        top = await claim(b)
        assert top["task"]["key"] == "top"
        await call(a, "update_task", task_key="base", action="reopen", reason="regression in base")
        rows = {r["key"]: r for r in (await call(a, "list_tasks"))["tasks"]}
        assert rows["top"]["status"] == "pending" and "owner" not in rows["top"] and "attempts" not in rows["top"]
        err = await fail(
            b, "update_task", task_key="top", action="complete", lease_token=top["lease"]["token"], verification="v"
        )
        assert err.code == "lease_lost" and "a dependency was reopened" in err.text
        again = await claim(b)
        assert again["task"]["key"] == "base", "the reopened dependency comes first; top waits for it"


@pytest.mark.slow  # builds thousands of tasks
async def test_claim_reads_its_indexes_in_order(harness, workspace):
    """After big adds (8,000 tasks), a claim's read takes the best pending tasks from ix_task_pending in
    claim order and the lapsed leases from ix_task_retry_lease: no scan of every task, no sort of every
    pending one, and none of the live claimed tasks (the claim bench's 1,000 holders) walked past.
    PostgreSQL's claim statement walks ix_task_claim in order (FOR UPDATE SKIP LOCKED). (PostgreSQL
    without statistics picked a bitmap scan over all pending tasks plus a sort; add_tasks refreshes them.)"""
    from mcp_harness.models import TaskSpec
    from mcp_harness.service import Identity
    from mcp_harness.store.connection import Query
    from mcp_harness.tasks.store import queries

    ident = Identity(workspace, "a")
    for start in range(0, 8000, 500):
        await harness.tasks.add(
            ident, AddTasksArgs(tasks=[TaskSpec(key=f"t{i}", title="t") for i in range(start, start + 500)])
        )

    def literal(sql: str) -> str:  # the statement with its parameters written in, as the planner sees a claim
        return sql.replace(":ws", f"'{workspace}'").replace(":now", "1e12")

    async with harness.db.read() as conn:
        sql = literal(queries.claim_probe(False, False).sqlite)
        if conn.dialect == "postgresql":
            plan = "\n".join(r[0] for r in await conn.fetch_all(Query("EXPLAIN " + sql)))
            # the pending part by either index in claim order (its planner weighs them), never a scan
            assert "ix_task_retry_lease" in plan and "Seq Scan on tasks" not in plan, plan
            assert "ix_task_pending" in plan or "ix_task_claim" in plan, plan
            walk = literal(queries._pick(False, False, "postgresql", walk=True)) + " FOR UPDATE SKIP LOCKED"
            plan = "\n".join(r[0] for r in await conn.fetch_all(Query("EXPLAIN " + walk)))
            assert "Index Scan using ix_task_claim" in plan and "Sort" not in plan, plan
        else:
            plan = [r[-1] for r in await conn.fetch_all(Query("EXPLAIN QUERY PLAN " + sql))]
            assert any("ix_task_pending (workspace=? AND status=? AND ready=?)" in p for p in plan), plan
            assert any("ix_task_retry_lease" in p for p in plan), plan
            assert not any(p.startswith("SCAN tasks") for p in plan), plan
            # the one sort is the merge's, of at most a page of pending tasks and the lapsed leases
            assert sum("TEMP B-TREE" in p for p in plan) == 1, plan


async def test_an_unknown_list_status_is_named_in_one_line(sqlite_url, workspace):
    """A bad status answers one line naming the statuses (pydantic explained both arms of the union)."""
    async with mcp_client(sqlite_url, workspace) as client:
        for bad in ("open", ["pending", "todo"], 3):
            err = await fail(client, "list_tasks", status=bad)
            assert err.text == (
                "[invalid_argument] status: one status or a list of them, each one of: "
                "pending, claimed, in_review, done, failed, cancelled, blocked"
            ), err.text
        assert (await call(client, "list_tasks", status=["pending", "blocked"]))["tasks"] == []
