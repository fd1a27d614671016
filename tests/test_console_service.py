"""What the console reads (service/console*.py), on both backends: the board, one task, the graph,
the timeline, threads and their diffs, agents, workspaces and the metrics' figures."""

from __future__ import annotations

import pytest

from mcp_harness.arguments import (
    AddTasksArgs,
    ClaimTaskArgs,
    ListTasksArgs,
    MessageArgs,
    RecordProgressArgs,
    SaveCheckpointArgs,
    UpdateTaskArgs,
)
from mcp_harness.checkpoints.jsondiff import MAX_CHANGES, diff
from mcp_harness.errors import InvalidArgument, NotFound
from mcp_harness.models import TaskSpec
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


async def seed(h: Harness, ws: str) -> Identity:
    """base -> mid -> top; lone; bad (fails) -> stuck (blocked); held by bob."""
    alice, bob = Identity(ws, "alice"), Identity(ws, "bob")
    await h.tasks.add(
        alice,
        AddTasksArgs(
            tasks=[
                TaskSpec(key="base", title="Base <b>work</b>", priority=2, steps=["one", "two"], description="d"),
                TaskSpec(key="mid", title="Middle", depends_on=["base"]),
                TaskSpec(key="top", title="Top", depends_on=["mid", "base"]),
                TaskSpec(key="lone", title="Alone", tags=["x"]),
                TaskSpec(key="bad", title="Will fail", max_attempts=1),
                TaskSpec(key="stuck", title="Behind a failure", depends_on=["bad"]),
                TaskSpec(key="held", title="Held by bob", priority=9),
            ]
        ),
    )
    got = await h.tasks.claim(alice, ClaimTaskArgs(task_key="base"))
    await h.tasks.update(
        alice, UpdateTaskArgs(task_key="base", action="complete", lease_token=got.lease.token, verification="ok")
    )
    got = await h.tasks.claim(alice, ClaimTaskArgs(task_key="bad"))
    await h.tasks.update(
        alice, UpdateTaskArgs(task_key="bad", action="fail", lease_token=got.lease.token, error="boom", retry=False)
    )
    await h.tasks.claim(bob, ClaimTaskArgs(task_key="held", lease_seconds=60))
    return alice


async def test_board_columns_show_every_task_with_what_it_waits_on(harness: Harness, workspace: str):
    alice = await seed(harness, workspace)
    board = await harness.console.board(alice)
    columns = {c.status: c for c in board.columns}
    assert [c.status for c in board.columns] == [
        "pending",
        "claimed",
        "in_review",
        "blocked",
        "failed",
        "done",
        "cancelled",
    ]
    assert {s: [card.key for card in c.cards] for s, c in columns.items()} == {
        "pending": ["mid", "top", "lone"],
        "claimed": ["held"],
        "blocked": ["stuck"],
        "failed": ["bad"],
        "done": ["base"],
        "in_review": [],
        "cancelled": [],
    }
    assert {s: c.total for s, c in columns.items()} == board.counts.model_dump()
    cards = {card.key: card for c in board.columns for card in c.cards}
    assert cards["mid"].ready and cards["lone"].ready and not cards["top"].ready
    assert [(d.key, d.status) for d in cards["top"].waits_on] == [("mid", "pending")]
    assert [(d.key, d.status) for d in cards["stuck"].waits_on] == [("bad", "failed")]
    assert cards["held"].owner == "bob" and cards["held"].lease_expires_at and not cards["held"].lease_expired
    assert cards["bad"].last_error == "boom" and cards["bad"].attempts == 1
    assert cards["base"].title == "Base <b>work</b>"  # stored as written; the templates escape it
    small = await harness.console.board(alice, per_column=1)
    assert [len(c.cards) for c in small.columns] == [1, 1, 0, 1, 1, 1, 0]
    assert {c.status: c.total for c in small.columns}["pending"] == 3


async def test_task_page_has_dependencies_both_ways_and_its_progress(harness: Harness, workspace: str):
    alice = await seed(harness, workspace)
    for i in range(3):
        await harness.progress.record(alice, RecordProgressArgs(summary=f"about mid {i}", task_key="mid"))
    await harness.progress.record(alice, RecordProgressArgs(summary="about something else", task_key="top"))
    page = await harness.console.task(alice, "mid", limit=2)
    assert page.task.key == "mid" and page.task.status == "pending"
    assert [(d.key, d.status) for d in page.depends_on] == [("base", "done")]
    assert [d.key for d in page.dependents] == ["top"]
    assert [e.summary for e in page.progress] == ["about mid 2", "about mid 1"]
    older = await harness.console.task(alice, "mid", before_seq=page.more_progress, limit=2)
    assert [e.summary for e in older.progress] == ["about mid 0"] and older.more_progress is None
    with pytest.raises(NotFound):
        await harness.console.task(alice, "nope")


async def test_a_cancelled_dependency_holds_nothing_back_on_board_or_task_page(harness: Harness, workspace: str):
    """The board agrees with list_tasks' `ready` (contract revision 2): a cancelled dependency is not waited
    on; a cancelled card shows its cancel reason, not the old error; gates and review tasks are marked."""
    alice, olga = Identity(workspace, "alice"), Identity(workspace, "olga", "operator")
    await harness.tasks.add(
        alice,
        AddTasksArgs(
            tasks=[
                TaskSpec(key="readme", title="Write the README", max_attempts=2),
                TaskSpec(key="docs", title="Docs site", depends_on=["readme"]),
                TaskSpec(key="copy", title="Copy", review=True),
                TaskSpec(key="go", title="Ship it?", kind="gate", depends_on=["copy"]),
            ]
        ),
    )
    got = await harness.tasks.claim(alice, ClaimTaskArgs(task_key="readme"))
    await harness.tasks.update(
        alice, UpdateTaskArgs(task_key="readme", action="fail", lease_token=got.lease.token, error="old boom")
    )
    await harness.tasks.update(olga, UpdateTaskArgs(task_key="readme", action="cancel", reason="the wiki replaces it"))
    listed = {t.key: t for t in (await harness.tasks.list(alice, ListTasksArgs())).tasks}
    board = await harness.console.board(alice)
    cards = {card.key: card for c in board.columns for card in c.cards}
    assert listed["docs"].ready and cards["docs"].ready and cards["docs"].waits_on == []
    assert cards["readme"].cancel_reason == "the wiki replaces it" and cards["readme"].last_error is None
    assert (cards["go"].kind, cards["go"].review, cards["copy"].review) == ("gate", False, True)
    assert not cards["go"].ready and [d.key for d in cards["go"].waits_on] == ["copy"]
    page = await harness.console.task(alice, "docs")
    assert [(d.key, d.status, d.holds_back) for d in page.depends_on] == [("readme", "cancelled", False)]
    needed = await harness.console.task(alice, "copy")
    assert [(d.key, d.kind) for d in needed.dependents] == [("go", "gate")]
    graph = await harness.console.graph(alice)
    assert {n.key: (n.kind, n.review) for n in graph.nodes}["go"] == ("gate", False)


async def test_graph_has_the_tasks_and_the_edges_among_them(harness: Harness, workspace: str):
    alice = await seed(harness, workspace)
    graph = await harness.console.graph(alice)
    assert [n.key for n in graph.nodes] == ["base", "mid", "top", "lone", "bad", "stuck", "held"]
    assert sorted(graph.edges) == [("mid", "base"), ("stuck", "bad"), ("top", "base"), ("top", "mid")]
    assert graph.total == 7
    first = await harness.console.graph(alice, limit=2)
    assert [n.key for n in first.nodes] == ["base", "mid"] and first.edges == [("mid", "base")] and first.total == 7


async def test_timeline_filters_search_and_pages(harness: Harness, workspace: str):
    alice, bob = Identity(workspace, "alice"), Identity(workspace, "bob")
    await harness.tasks.add(
        alice, AddTasksArgs(tasks=[{"key": "t1", "title": "Login"}])
    )  # progress names a task that exists
    await harness.progress.record(
        alice, RecordProgressArgs(summary="Fixed the LOGIN bug", status="done", task_key="t1")
    )
    await harness.progress.record(
        bob, RecordProgressArgs(summary="notes", details="the login page is slow", thread="side")
    )
    await harness.progress.record(bob, RecordProgressArgs(summary="100% done_ish", status="in_progress"))
    await harness.progress.record(alice, RecordProgressArgs(summary="unrelated", status="blocked"))
    tl = harness.console.timeline
    assert [e.summary for e in (await tl(alice, text="login")).entries] == ["notes", "Fixed the LOGIN bug"]
    assert [e.summary for e in (await tl(alice, agent="bob")).entries] == ["100% done_ish", "notes"]
    assert [e.summary for e in (await tl(alice, thread="side")).entries] == ["notes"]
    assert [e.summary for e in (await tl(alice, task_key="t1")).entries] == ["Fixed the LOGIN bug"]
    assert [e.summary for e in (await tl(alice, status="blocked")).entries] == ["unrelated"]
    # full-text search (store/search.py): words, not substrings; % and _ are no wildcards
    assert [e.summary for e in (await tl(alice, text="100%")).entries] == ["100% done_ish"]
    assert (await tl(alice, text="0_d")).entries == []
    assert [e.summary for e in (await tl(alice, text="logins", agent="bob")).entries] == ["notes"]  # stemmed
    with pytest.raises(InvalidArgument, match="unclosed"):
        await tl(alice, text='"login')
    page = await tl(alice, limit=3)
    assert len(page.entries) == 3 and page.next_before_seq == page.entries[-1].seq
    rest = await tl(alice, limit=3, before_seq=page.next_before_seq)
    assert [e.summary for e in rest.entries] == ["Fixed the LOGIN bug"] and rest.next_before_seq is None
    with pytest.raises(InvalidArgument):
        await tl(alice, status="finished")


async def test_the_thread_filter_offers_the_first_threads_by_name(harness: Harness, workspace: str):
    alice = Identity(workspace, "alice")
    for name in ("zeta", "alpha", "mid"):
        await harness.checkpoints.save(alice, SaveCheckpointArgs(state={"n": name}, thread=name))
    assert await harness.console.thread_names(alice) == ["alpha", "mid", "zeta"]
    assert await harness.console.thread_names(alice, limit=2) == ["alpha", "mid"]


async def test_threads_states_and_diffs(harness: Harness, workspace: str):
    alice = Identity(workspace, "alice")
    await harness.checkpoints.save(alice, SaveCheckpointArgs(state={"a": 1, "list": [1, 2], "gone": True}, thread="t"))
    await harness.checkpoints.save(
        alice, SaveCheckpointArgs(state={"a": 2, "list": [1, 2, 3], "new/key": {"x": None}}, thread="t")
    )
    [summary] = await harness.console.threads(alice)
    assert (summary.name, summary.latest_version) == ("t", 2)
    meta, state = await harness.console.state(alice, "t", 1)
    assert meta.version == 1 and state == {"a": 1, "list": [1, 2], "gone": True}
    found = await harness.console.diff(alice, "t", 1, 2)
    assert [(c.pointer, c.kind, c.old, c.new) for c in found.changes] == [
        ("/a", "changed", 1, 2),
        ("/list/2", "added", None, 3),
        ("/gone", "removed", True, None),
        ("/new~1key", "added", None, {"x": None}),
    ]
    with pytest.raises(NotFound):
        await harness.console.state(alice, "t", 9)


def test_diff_compares_json_values_not_python_ones():
    assert diff({"a": True}, {"a": 1})[0][0].kind == "changed"
    assert diff({"a": 1}, {"a": 1.0}) == ([], 0)
    assert [c.pointer for c in diff([1, 2, 3], [1])[0]] == ["/1", "/2"]
    assert [c.kind for c in diff([1, 2], [2, 1])[0]] == ["changed"]
    changes, more = diff({str(i): i for i in range(MAX_CHANGES + 7)}, {})
    assert len(changes) == MAX_CHANGES and more == 7


async def test_agents_show_holders_last_seen_and_overdue_leases(harness: Harness, workspace: str):
    from mcp_harness import clock

    alice = await seed(harness, workspace)
    await harness.progress.record(Identity(workspace, "carol"), RecordProgressArgs(summary="hello"))
    clock.advance(120)  # bob's 60-second lease on `held` runs out
    agents = await harness.console.agents(alice)
    rows = {a.agent: a for a in agents.agents}
    assert set(rows) == {"alice", "bob", "carol"}
    assert [c.key for c in rows["bob"].holds] == ["held"] and rows["alice"].holds == []
    assert all(a.last_seen for a in agents.agents)
    assert [(c.key, c.owner, c.lease_expired) for c in agents.overdue] == [("held", "bob", True)]


async def test_workspaces_include_those_with_only_tasks(harness: Harness, workspace: str):
    await harness.tasks.add(Identity(workspace + "-tasks", "a"), AddTasksArgs(tasks=[TaskSpec(key="k", title="t")]))
    await harness.progress.record(Identity(workspace + "-log", "a"), RecordProgressArgs(summary="s"))
    names = await harness.console.workspaces()
    assert {workspace + "-tasks", workspace + "-log"} <= set(names) and names == sorted(names)


async def test_metrics_figures_count_tasks_per_workspace_and_overdue_leases(harness: Harness, workspace: str):
    from mcp_harness import clock

    await seed(harness, workspace)
    clock.advance(120)
    counts, expired = await harness.console.metrics()
    mine = {status: n for ws, status, n in counts if ws == workspace}
    assert mine == {"pending": 3, "claimed": 1, "blocked": 1, "failed": 1, "done": 1}
    assert (workspace, 1) in expired


async def test_a_console_session_is_opaque_bound_to_its_token_and_ends(harness: Harness, workspace: str):
    """Sign-in makes a random session id (only its hash is stored); signing out ends it; revoking the
    token ends every session made from it; an unknown or revoked token makes none."""
    from mcp_harness.access.console_sessions import session_hash

    token = await harness.tokens.create(workspace, "olga", "operator")
    first, second = await harness.console_sessions.start(token), await harness.console_sessions.start(token)
    assert first and second and first != second and token not in (first, second)
    found = await harness.console_sessions.find(first)
    assert (found.ident.workspace, found.ident.agent, found.ident.role) == (workspace, "olga", "operator")
    async with harness.db.read() as conn:
        from mcp_harness.store.connection import Query

        stored = await conn.fetch_all(Query("SELECT session_hash, token_hash FROM console_sessions"))
    assert {r[0] for r in stored} >= {session_hash(first), session_hash(second)}
    assert not any(first in r or token in r for r in stored)  # neither the id nor the token is kept
    await harness.console_sessions.end(first)
    assert await harness.console_sessions.find(first) is None
    assert await harness.console_sessions.find(second) is not None
    await harness.tokens.revoke(token)
    assert await harness.console_sessions.find(second) is None
    assert await harness.console_sessions.start(token) is None
    assert await harness.console_sessions.start("mcph_nope") is None
    assert await harness.console_sessions.find(token) is None  # a token is not a session id


async def test_an_expired_console_session_is_dead(harness: Harness, workspace: str, monkeypatch):
    from mcp_harness.access import console_sessions

    token = await harness.tokens.create(workspace, "olga", "reader")
    monkeypatch.setattr(console_sessions, "SESSION_SECONDS", -1)
    sid = await harness.console_sessions.start(token)
    assert sid and await harness.console_sessions.find(sid) is None


async def test_pace_rates_a_young_project_over_the_time_it_has_run(harness: Harness, workspace: str):
    """A 6-minute-old project that finished 24 tasks did 240 an hour, not "1.0 an hour" over 24 hours."""
    alice = Identity(workspace, "alice")
    await harness.tasks.add(alice, AddTasksArgs(tasks=[TaskSpec(key=f"t{i}", title="work") for i in range(3)]))
    for i in range(3):
        got = await harness.tasks.claim(alice, ClaimTaskArgs(task_key=f"t{i}"))
        await harness.tasks.update(
            alice,
            UpdateTaskArgs(task_key=f"t{i}", action="complete", lease_token=got.lease.token, verification="checked"),
        )
    pace = await harness.console.pace(alice)
    assert sum(pace.per_hour) == 3
    assert 0 < pace.hours_covered < 0.1
    assert pace.per_hour_rate > 3 / 0.1  # over minutes, not over 24 hours


async def test_the_timeline_choices_name_everyone_who_acted_and_every_task(harness: Harness, workspace: str):
    alice, olga = Identity(workspace, "alice"), Identity(workspace, "olga", "operator")
    await harness.tasks.add(
        alice, AddTasksArgs(tasks=[TaskSpec(key="b-task", title="b"), TaskSpec(key="a-task", title="a")])
    )
    await harness.tasks.update(olga, UpdateTaskArgs(task_key="a-task", action="cancel", reason="not needed after all"))
    assert "olga" in await harness.console.agent_names(alice)  # an operator who acted, from the task events
    assert await harness.console.task_keys(alice) == ["a-task", "b-task"]
    found = await harness.console.timeline(alice, text="needed", with_events=True)
    assert [e.event.kind for e in found.events] == ["cancel"]  # found by the words of its reason
    cancels = await harness.console.timeline(alice, kind="cancel", with_events=True)
    assert {e.task_key for e in cancels.events} == {"a-task"}
    with pytest.raises(InvalidArgument):
        await harness.console.timeline(alice, kind="nonsense")


async def test_needs_counts_the_peoples_messages_the_inbox_shows_whatever_their_age(harness: Harness, workspace: str):
    """A message to the operators stays in their inbox until one acknowledges it: the "needs you" bar
    counts it as long (it dropped those older than the 7 days that only `*` messages last)."""
    from mcp_harness import clock

    alice, olga = Identity(workspace, "alice"), Identity(workspace, "olga", "operator")
    await harness.messages.act(alice, MessageArgs(action="send", to="operators", body="which port?"))
    await harness.messages.act(alice, MessageArgs(action="send", to="*", body="everyone: rebase"))
    clock.advance(8 * 86400)
    inbox = await harness.messages.read(olga, limit=200)
    shown = [m for m in inbox.messages if m.to == "operators"]
    assert len(shown) == 1 and not [m for m in inbox.messages if m.to == "*"]
    assert (await harness.console.needs(workspace)).messages == len(shown) == 1
    await harness.messages.act(olga, MessageArgs(action="ack", ids=[shown[0].id]))
    assert (await harness.console.needs(workspace)).messages == 0
