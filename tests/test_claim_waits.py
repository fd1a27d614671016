"""An empty claim's `waiting_on` names the roots of every wait (up to 5), the winning reason's first, so
that a person's review is not hidden behind held tasks. The pure choice (`reasons.shared`), and the
MCP client against the real server on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from support import call, mcp_client

from mcp_harness.models import WaitingOn
from mcp_harness.tasks.reasons import MAX_WAITING_ON, shared


def on(key: str) -> WaitingOn:
    return WaitingOn(key=key, status="pending", owner=None, retry_after=None)


def test_the_other_waits_keep_a_place_after_the_winning_one():
    winning = [on(f"held{i}") for i in range(7)]
    got = [w.key for w in shared([winning, [on("review"), on("review2")], [on("failed")]])]
    assert got == ["held0", "held1", "held2", "review", "failed"]
    assert [w.key for w in shared([winning[:2], [on("review"), on("review2")]])] == [
        "held0",
        "held1",
        "review",
        "review2",
    ]
    assert [w.key for w in shared([winning[:1], [on("held0"), on("r")]])] == ["held0", "r"], "each key once"


@given(st.lists(st.lists(st.integers(0, 30), max_size=8), min_size=1, max_size=5))
def test_shared_keeps_the_winning_first_and_every_wait_while_there_is_room(groups: list[list[int]]):
    seen: set[int] = set()
    lists = []
    for group in groups:  # each root is classed by one wait: the groups are disjoint
        lists.append([on(f"k{n}") for n in dict.fromkeys(group) if n not in seen])
        seen.update(group)
    got = [w.key for w in shared(lists)]
    assert len(got) == min(MAX_WAITING_ON, len(seen)) and len(set(got)) == len(got)
    order = [w.key for g in lists for w in g]
    assert got == [k for k in order if k in got], "the winning wait's roots first, then each wait's in order"
    firsts = [g[0].key for g in lists if g]
    assert set(firsts[:MAX_WAITING_ON]) <= set(got), "every wait is named while there is room"


def t(key: str, **kw) -> dict:
    return {"key": key, "title": f"task {key}", **kw}


@pytest.mark.anyio
async def test_all_claimed_names_the_review_the_rest_waits_on(db_url, workspace):
    """One task is held; five others wait on a task in review: the answer is `all_claimed` (the held
    lease may end by itself) and `waiting_on` names the held task first, then the review."""
    async with mcp_client(db_url, workspace, agent="a") as a, mcp_client(db_url, workspace, agent="b") as b:
        tasks = [t("held"), t("api", review=True)] + [t(f"use{i}", depends_on=["api"]) for i in range(5)]
        await call(a, "add_tasks", tasks=tasks)
        api = await call(a, "claim_task", task_key="api")
        await call(
            a,
            "update_task",
            task_key="api",
            action="complete",
            lease_token=api["lease"]["token"],
            verification="tested",
        )
        held = await call(b, "claim_task")
        assert held["task"]["key"] == "held"
        why = await call(a, "claim_task")
        assert why["task"] is None and why["reason"] == "all_claimed", why
        assert [(w["key"], w["status"]) for w in why["waiting_on"]] == [("held", "claimed"), ("api", "in_review")]
        assert why["retry_after"] > 800, "retry_after is the held lease's"
        # a claim for one of the waiting tasks says only its own wait
        why = await call(a, "claim_task", task_key="use3")
        assert why["reason"] == "waiting_on_review" and [w["key"] for w in why["waiting_on"]] == ["api"]
