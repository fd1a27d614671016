"""A reopen holds back what depends on the reopened task however far down, while done tasks stay done;
the claim's reason names the reopened task. Through the official MCP client, on SQLite and PostgreSQL,
plus the pure rule of `tasks.rules`."""

from __future__ import annotations

import pytest
from support import call, mcp_client

from mcp_harness.tasks.rules import Status, dependency_flags

pytestmark = pytest.mark.anyio


def t(key: str, **kw) -> dict:
    return {"key": key, "title": f"task {key}", **kw}


async def done(client, key: str) -> None:
    got = await call(client, "claim_task", task_key=key)
    assert got["task"]["key"] == key, got
    await call(
        client, "update_task", task_key=key, action="complete", lease_token=got["lease"]["token"], verification="tested"
    )


async def rows(client) -> dict[str, dict]:
    listed = await call(client, "list_tasks", status=["pending", "claimed", "done", "in_review", "blocked"])
    return {r["key"]: r for r in listed["tasks"]}


def test_a_stale_done_dependency_is_not_settled():
    """The pure rule: a done dependency counts as settled unless it is stale; a cancelled one always."""
    assert dependency_flags([(Status.DONE, False, False)]) == (True, False)
    assert dependency_flags([(Status.DONE, False, True)]) == (False, False)
    assert dependency_flags([(Status.CANCELLED, False, True)]) == (True, False)
    assert dependency_flags([(Status.DONE, False, False), (Status.PENDING, False, False)]) == (False, False)


async def test_a_reopen_holds_back_pending_tasks_through_done_ones(db_url, workspace):
    """`release` depends on `lengths` through `docs` and `cli`, both done: reopening `lengths` leaves
    `docs` and `cli` done and makes `release` wait, naming `lengths`; done again, `release` is ready."""
    async with mcp_client(db_url, workspace, agent="a") as a, mcp_client(db_url, workspace, agent="b") as b:
        plan = [
            t("lengths"),
            t("docs", depends_on=["lengths"]),
            t("cli", depends_on=["lengths"]),
            t("release", depends_on=["docs", "cli"]),
            t("other"),
        ]
        await call(a, "add_tasks", tasks=plan)
        for key in ("lengths", "docs", "cli"):
            await done(a, key)
        assert (await rows(a))["release"]["ready"] is True
        await call(a, "update_task", task_key="lengths", action="reopen", reason="lengths are wrong")
        listed = await rows(a)
        assert listed["docs"]["status"] == listed["cli"]["status"] == "done", "done tasks stay done"
        assert listed["release"]["status"] == "pending" and not listed["release"].get("ready")
        ready = await call(a, "list_tasks", ready=True)
        assert {r["key"] for r in ready["tasks"]} == {"lengths", "other"}

        # the named claim answers for release: it waits on lengths, which b now holds
        held = await call(b, "claim_task", task_key="lengths")
        assert held["task"]["key"] == "lengths"
        why = await call(a, "claim_task", task_key="release")
        assert why["task"] is None and why["reason"] == "all_claimed", why
        assert [w["key"] for w in why["waiting_on"]] == ["lengths"]
        # an unfiltered claim takes other work first, then says the same
        assert (await call(a, "claim_task"))["task"]["key"] == "other"
        why = await call(a, "claim_task")
        assert why["task"] is None and "lengths" in [w["key"] for w in why["waiting_on"]], why

        await call(
            b,
            "update_task",
            task_key="lengths",
            action="complete",
            lease_token=held["lease"]["token"],
            verification="fixed",
        )
        assert (await rows(a))["release"]["ready"] is True
        got = await call(a, "claim_task", task_key="release")
        assert got["task"]["key"] == "release"


async def test_a_task_added_on_a_stale_task_waits_and_one_reopened_in_the_middle_is_judged_again(db_url, workspace):
    """A task added after the reopen, on a done task behind it, waits too; reopening the done task in
    between (whose own dependency is unfinished) makes it pending and not ready, and nothing is
    claimable downstream until both are done again."""
    async with mcp_client(db_url, workspace, agent="a") as a:
        await call(a, "add_tasks", tasks=[t("base"), t("mid", depends_on=["base"]), t("top", depends_on=["mid"])])
        for key in ("base", "mid"):
            await done(a, key)
        await call(a, "update_task", task_key="base", action="reopen", reason="redo")
        await call(a, "add_tasks", tasks=[t("late", depends_on=["mid"])])
        listed = await rows(a)
        assert not listed["late"].get("ready") and not listed["top"].get("ready")
        why = await call(a, "claim_task", task_key="late")
        assert why["task"] is None and [w["key"] for w in why["waiting_on"]] == ["base"], why

        await call(a, "update_task", task_key="mid", action="reopen", reason="redo too")
        listed = await rows(a)
        assert listed["mid"]["status"] == "pending" and not listed["mid"].get("ready")
        await done(a, "base")
        assert not (await rows(a))["top"].get("ready"), "mid is not done again yet"
        await done(a, "mid")
        listed = await rows(a)
        assert listed["top"]["ready"] is True and listed["late"]["ready"] is True


async def test_a_claimed_task_behind_a_reopen_loses_its_lease(db_url, workspace):
    """No task is held while something it depends on, however far down, is unfinished: the lease of a
    task that depends on the reopened one through a done task is revoked, and the reopen says so."""
    async with mcp_client(db_url, workspace, agent="a") as a, mcp_client(db_url, workspace, agent="b") as b:
        await call(a, "add_tasks", tasks=[t("base"), t("mid", depends_on=["base"]), t("top", depends_on=["mid"])])
        for key in ("base", "mid"):
            await done(a, key)
        top = await call(b, "claim_task")
        assert top["task"]["key"] == "top"
        reopened = await call(a, "update_task", task_key="base", action="reopen", reason="redo")
        assert reopened.get("revoked") == ["top"], reopened
        assert (await rows(a))["top"]["status"] == "pending"
