"""The console's dashboard reads on both backends: paged lists, liveness (contacts and silent
holders), what needs a person."""

from __future__ import annotations

import anyio
import pytest
from support import call, mcp_client, settings_for

from mcp_harness import contacts as contacts_module
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, RecordProgressArgs, UpdateTaskArgs
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


async def test_lists_come_in_pages_and_a_card_names_a_few_dependencies(harness: Harness, workspace: str):
    me = Identity(workspace, "planner")
    roots = [f"r{i}" for i in range(7)]
    await harness.tasks.add(me, AddTasksArgs(tasks=[TaskSpec(key=k, title=k) for k in roots]))
    await harness.tasks.add(
        me, AddTasksArgs(tasks=[TaskSpec(key=f"l{i:03}", title="leaf", depends_on=roots) for i in range(130)])
    )
    board = await harness.console.board(me, per_column=10)
    pending = next(c for c in board.columns if c.status == "pending")
    assert pending.total == 137 and len(pending.cards) == 10
    later = await harness.console.board(me, per_column=10, only="pending", offset=20)
    (column,) = later.columns
    leaf = column.cards[0]
    assert leaf.key == "l013" and len(leaf.waits_on) == 4 and leaf.waits_on_total == 7
    page = await harness.console.task(me, "r0", needed_offset=100)
    assert page.dependents_total == 130 and [d.key for d in page.dependents][:1] == ["l100"]
    assert len(page.dependents) == 30
    leaf_page = await harness.console.task(me, "l000")
    assert leaf_page.depends_on_total == 7 and len(leaf_page.depends_on) == 7


async def test_contacts_are_written_at_most_every_few_seconds_and_flag_silent_holders(
    db_url: str, workspace: str, monkeypatch: pytest.MonkeyPatch
):
    clock = [1_000_000.0]
    monkeypatch.setattr(contacts_module, "now", lambda: clock[0])
    async with Harness.open(settings_for(db_url, silent_after_seconds=60)) as h:
        alice, bob = Identity(workspace, "alice"), Identity(workspace, "bob")
        await h.tasks.add(alice, AddTasksArgs(tasks=[TaskSpec(key="a", title="a"), TaskSpec(key="b", title="b")]))
        got = await h.tasks.claim(alice, ClaimTaskArgs(task_key="a"))
        await h.contacts.touch(alice, "claim_task", got)
        await h.contacts.touch(bob, "claim_task", await h.tasks.claim(bob, ClaimTaskArgs(tags=["none"])))
        clock[0] += 1
        await h.contacts.touch(alice, "restore_state")  # within 5 s: not written
        agents = await h.console.agents(alice)
        rows = {a.agent: a for a in agents.agents}
        assert rows["alice"].last_tool == "claim_task" and rows["alice"].claim_outcome == "claimed"
        assert rows["bob"].claim_outcome == "none_pending" and rows["bob"].state == "idle"
        clock[0] += 5
        await h.contacts.touch(alice, "list_tasks")  # 6 s after the first: written
        rows = {a.agent: a for a in (await h.console.agents(alice)).agents}
        assert rows["alice"].last_tool == "list_tasks" and rows["alice"].state == "working"
        assert (await h.console.needs(workspace)).silent == 0  # the claim just now: not silent


async def test_an_idle_agent_says_what_it_did_with_its_last_task(db_url: str, workspace: str):
    """The trial: the Agents page said "idle: its last claim got a task" of agents that had finished their
    work. What an agent last did with the task it held (complete, release, fail) is its idle reason now,
    recorded by the server as it answers the call (the official MCP client here)."""
    async with mcp_client(db_url, workspace, "alice") as alice, mcp_client(db_url, workspace, "bob") as bob:
        await call(alice, "add_tasks", tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B"}])
        got = await call(alice, "claim_task", task_key="a")
        await call(
            alice,
            "update_task",
            task_key="a",
            action="complete",
            lease_token=got["lease"]["token"],
            verification="pytest passed",
        )
        held = await call(bob, "claim_task", task_key="b")
        await call(bob, "update_task", task_key="b", action="heartbeat", lease_token=held["lease"]["token"])
        async with Harness.open(settings_for(db_url)) as h:
            rows = {a.agent: a for a in (await h.console.agents(Identity(workspace, "olga", "operator"))).agents}
        assert rows["alice"].state == "idle" and rows["alice"].let_go == ("completed", "a")
        assert rows["bob"].state == "working" and rows["bob"].let_go is None and rows["bob"].claim_outcome == "claimed"
        await call(
            bob, "update_task", task_key="b", action="release", lease_token=held["lease"]["token"], reason="out of time"
        )
        async with Harness.open(settings_for(db_url)) as h:
            rows = {a.agent: a for a in (await h.console.agents(Identity(workspace, "olga", "operator"))).agents}
        assert rows["bob"].let_go == ("released", "b")


async def test_a_quiet_holder_is_flagged_before_its_lease_ends_and_a_heartbeating_one_never(
    db_url: str, workspace: str
):
    async with Harness.open(settings_for(db_url, silent_after_seconds=0.5)) as h:
        alice, bob = Identity(workspace, "alice"), Identity(workspace, "bob")
        await h.tasks.add(alice, AddTasksArgs(tasks=[TaskSpec(key="a", title="a"), TaskSpec(key="b", title="b")]))
        await h.contacts.touch(
            alice, "claim_task", await h.tasks.claim(alice, ClaimTaskArgs(task_key="a", lease_seconds=600))
        )
        got = await h.tasks.claim(bob, ClaimTaskArgs(task_key="b", lease_seconds=600))
        await h.contacts.touch(bob, "claim_task", got)
        for _ in range(3):
            await anyio.sleep(0.3)
            await h.tasks.update(bob, UpdateTaskArgs(task_key="b", action="heartbeat", lease_token=got.lease.token))
        needs = await h.console.needs(workspace)
        assert needs.silent == 1 and needs.overdue == 0
        agents = await h.console.agents(alice)
        assert [(c.key, c.owner) for c in agents.silent] == [("a", "alice")]
        assert agents.silent[0].silent_since is not None and not agents.silent[0].lease_expired
        rows = {a.agent: a.state for a in agents.agents}
        assert rows == {"alice": "silent", "bob": "working"}


async def test_stuck_ranks_blockers_and_the_root_of_a_wait_is_found_up_the_chain(harness: Harness, workspace: str):
    me = Identity(workspace, "planner")
    await harness.tasks.add(
        me,
        AddTasksArgs(
            tasks=[
                TaskSpec(key="base", title="base", max_attempts=1),
                TaskSpec(key="mid", title="mid", depends_on=["base"]),
                TaskSpec(key="top", title="top", depends_on=["mid"]),
                TaskSpec(key="side", title="side", depends_on=["base"]),
                TaskSpec(key="free", title="free"),
                TaskSpec(key="after-free", title="after free", depends_on=["free"]),
            ]
        ),
    )
    got = await harness.tasks.claim(me, ClaimTaskArgs(task_key="base"))
    await harness.tasks.update(
        me, UpdateTaskArgs(task_key="base", action="fail", lease_token=got.lease.token, error="boom")
    )
    stuck = await harness.console.stuck(me)
    got = [(b.task.key, b.waiting, b.behind, b.action) for b in stuck.blockers]
    assert got == [("base", 2, 3, "reopen"), ("free", 1, 1, None)]  # top waits on base through mid
    assert [d.key for d in await harness.console.root_of_wait(me, "top")] == ["mid", "base"]
    assert [d.key for d in await harness.console.root_of_wait(me, "after-free")] == ["free"]
    assert await harness.console.root_of_wait(me, "free") == []


async def test_pace_measures_time_in_status_review_waits_throughput_and_the_burn_up(harness: Harness, workspace: str):
    me, person = Identity(workspace, "ana"), Identity(workspace, "olga", role="operator")
    await harness.tasks.add(
        me,
        AddTasksArgs(
            tasks=[TaskSpec(key=f"t{i}", title="t") for i in range(3)]
            + [TaskSpec(key="rev", title="reviewed", review=True)]
        ),
    )
    for key in ("t0", "t1"):
        got = await harness.tasks.claim(me, ClaimTaskArgs(task_key=key))
        await harness.tasks.update(
            me, UpdateTaskArgs(task_key=key, action="complete", lease_token=got.lease.token, verification="ok")
        )
    got = await harness.tasks.claim(me, ClaimTaskArgs(task_key="rev"))
    await harness.tasks.update(
        me, UpdateTaskArgs(task_key="rev", action="complete", lease_token=got.lease.token, verification="ok")
    )
    await anyio.sleep(0.05)
    await harness.tasks.update(person, UpdateTaskArgs(task_key="rev", action="approve", comment="fine"))
    pace = await harness.console.pace(me)
    spells = {s.status: s for s in pace.in_status}
    assert spells["claimed"].spells == 3 and spells["pending"].spells == 3 and spells["in_review"].spells == 1
    assert pace.review_wait is not None and pace.review_wait >= 0.05 and pace.oldest_review is None
    assert pace.done_last_hour == 3 and sum(pace.per_hour) == 3
    assert pace.scope[-1][1] == 4 and pace.done[-1][1] == 3  # planned 4, done 3
    assert [n for _, n in pace.done] == sorted(n for _, n in pace.done)  # a burn-up only rises


async def test_the_task_table_filters_by_status_owner_and_tag_and_sorts(harness: Harness, workspace: str):
    me = Identity(workspace, "ana")
    await harness.tasks.add(
        me,
        AddTasksArgs(
            tasks=[
                TaskSpec(key="a", title="a", priority=1, tags=["x"]),
                TaskSpec(key="b", title="b", priority=3),
                TaskSpec(key="c", title="c", priority=2, tags=["x", "y"], max_attempts=1),
                TaskSpec(key="d", title="d", depends_on=["c"]),
            ]
        ),
    )
    got = await harness.tasks.claim(me, ClaimTaskArgs(task_key="c"))
    await harness.tasks.update(
        me, UpdateTaskArgs(task_key="c", action="fail", lease_token=got.lease.token, retry=False, error="e")
    )
    table = await harness.console.table(me, sort="priority", descending=True)
    assert [r.key for r in table.rows] == ["b", "c", "a", "d"] and table.total == 4
    assert [r.key for r in (await harness.console.table(me, tag="x")).rows] == ["a", "c"]
    assert [r.key for r in (await harness.console.table(me, status="blocked")).rows] == ["d"]
    assert [r.key for r in (await harness.console.table(me, status="pending")).rows] == ["a", "b"]
    assert [r.key for r in (await harness.console.table(me, owner="ana")).rows] == ["c"]
    page = await harness.console.table(me, sort="key", limit=2, offset=2)
    assert [r.key for r in page.rows] == ["c", "d"] and page.total == 4


async def test_the_timeline_brings_the_task_events_of_its_time_span(harness: Harness, workspace: str):
    me = Identity(workspace, "ana")
    await harness.tasks.add(me, AddTasksArgs(tasks=[TaskSpec(key="a", title="a")]))
    got = await harness.tasks.claim(me, ClaimTaskArgs(task_key="a"))
    await harness.progress.record(me, RecordProgressArgs(summary="working on a", status="in_progress", task_key="a"))
    await harness.tasks.update(me, UpdateTaskArgs(task_key="a", action="release", lease_token=got.lease.token))
    page = await harness.console.timeline(me, with_events=True)
    assert [e.event.kind for e in page.events] == ["release", "claim"]
    assert "working on a" in [e.summary for e in page.entries]
    assert (await harness.console.timeline(me)).events == []
    assert (await harness.console.timeline(me, agent="someone-else", with_events=True)).events == []
