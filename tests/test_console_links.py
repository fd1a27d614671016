"""Checkpoints joined to the work (oversight/links.py), on both backends: a version goes with the
progress entry its agent wrote nearest the save (10 minutes either side, a tie to the one before) and
with the task that entry names, else the task its agent held then; the links back from entries and
tasks are the same rule read the other way. The clock is moved forward to place each write."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, RecordProgressArgs, SaveCheckpointArgs, UpdateTaskArgs
from mcp_harness.models import TaskSpec
from mcp_harness.oversight.links import LINK_WINDOW, _nearest
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


async def save(h: Harness, who: Identity, thread: str = "main", **state: object) -> str:
    return (
        await h.checkpoints.save(who, SaveCheckpointArgs(thread=thread, mode="merge", state=dict(state) or {"n": 1}))
    ).checkpoint_id


async def test_a_version_goes_with_its_agents_nearest_entry_and_that_entrys_task(harness: Harness, workspace: str):
    h, bob, carol = harness, Identity(workspace, "bob:1a2b3c4d"), Identity(workspace, "carol")
    await h.tasks.add(bob, AddTasksArgs(tasks=[TaskSpec(key="api", title="API"), TaskSpec(key="ui", title="UI")]))
    got = await h.tasks.claim(bob, ClaimTaskArgs(task_key="api"))
    await h.progress.record(bob, RecordProgressArgs(summary="endpoints drafted", task_key="api"))
    clock.advance(30)
    await h.progress.record(
        carol, RecordProgressArgs(summary="carol's note, nearer in time but another session", task_key="ui")
    )
    clock.advance(5)
    v1 = await save(h, bob, step=1)
    links = await h.console_links.versions(bob, [v1])
    link = links[v1]
    assert (link.thread, link.version, link.agent) == ("main", 1, "bob:1a2b3c4d")
    assert link.entry is not None and link.entry.summary == "endpoints drafted"
    assert (link.task_key, link.task_from) == ("api", "entry") and link.entry_gap == pytest.approx(-35, abs=1)

    # Nearest on either side: an entry 2 minutes after beats one 5 minutes before.
    clock.advance(300)
    await h.progress.record(bob, RecordProgressArgs(summary="tests written", task_key="api"))
    clock.advance(300)
    v2 = await save(h, bob, step=2)
    clock.advance(120)
    await h.progress.record(
        bob, RecordProgressArgs(summary="saved, then noted the result: 12 tests pass", task_key="api")
    )
    link = (await h.console_links.versions(bob, [v2]))[v2]
    assert link.entry is not None and link.entry.summary.startswith("saved, then noted")
    assert link.entry_gap == pytest.approx(120, abs=1)

    # Ten minutes is the reach: an entry 11 minutes away, on either side, is about other work.
    clock.advance(LINK_WINDOW * 3)
    await h.progress.record(bob, RecordProgressArgs(summary="long before", task_key="api"))
    clock.advance(LINK_WINDOW + 60)
    v3 = await save(h, bob, step=3)
    clock.advance(LINK_WINDOW + 60)
    await h.progress.record(bob, RecordProgressArgs(summary="long after", task_key="api"))
    link = (await h.console_links.versions(bob, [v3]))[v3]
    assert link.entry is None and (link.task_key, link.task_from) == ("api", "held")
    await h.tasks.update(
        bob, UpdateTaskArgs(task_key="api", action="complete", lease_token=got.lease.token, verification="ok")
    )


async def test_without_an_entry_in_the_window_the_task_is_the_one_the_agent_held(harness: Harness, workspace: str):
    h, bob = harness, Identity(workspace, "bob")
    await h.tasks.add(
        bob,
        AddTasksArgs(tasks=[TaskSpec(key="x", title="X"), TaskSpec(key="y", title="Y"), TaskSpec(key="z", title="Z")]),
    )
    await h.progress.record(bob, RecordProgressArgs(summary="an old note, long before", task_key="z"))
    clock.advance(LINK_WINDOW + 60)
    x = await h.tasks.claim(bob, ClaimTaskArgs(task_key="x"))
    y = await h.tasks.claim(bob, ClaimTaskArgs(task_key="y"))
    await h.tasks.update(
        bob, UpdateTaskArgs(task_key="y", action="complete", lease_token=y.lease.token, verification="ok")
    )
    v1 = await save(h, bob, step=1)  # holds x still (y, claimed later, is done)
    link = (await h.console_links.versions(bob, [v1]))[v1]
    assert link.entry is None and (link.task_key, link.task_from) == ("x", "held")

    # An entry that names no task: the version goes with it, and its task is the one held.
    await h.progress.record(bob, RecordProgressArgs(summary="thinking about the data model"))
    v2 = await save(h, bob, step=2)
    link = (await h.console_links.versions(bob, [v2]))[v2]
    assert link.entry is not None and link.entry.summary == "thinking about the data model"
    assert (link.task_key, link.task_from) == ("x", "held")

    # Released: nothing is held any more, and the release's note is the harness's, never bob's entry.
    await h.tasks.update(
        bob, UpdateTaskArgs(task_key="x", action="release", lease_token=x.lease.token, reason="stopping")
    )
    clock.advance(LINK_WINDOW + 60)
    v3 = await save(h, bob, step=3)
    link = (await h.console_links.versions(bob, [v3]))[v3]
    assert link.entry is None and link.task_key is None and link.task_from is None

    # Taken over by another agent after bob's lease ran out: bob no longer held it when he saved.
    again = await h.tasks.claim(bob, ClaimTaskArgs(task_key="x", lease_seconds=10))
    assert again.lease is not None
    clock.advance(20)
    await h.tasks.claim(Identity(workspace, "carol"), ClaimTaskArgs(task_key="x"))
    v4 = await save(h, bob, step=4)
    assert (await h.console_links.versions(bob, [v4]))[v4].task_key is None


async def test_links_back_from_entries_and_from_a_task(harness: Harness, workspace: str):
    h, bob, erin = harness, Identity(workspace, "bob"), Identity(workspace, "erin")
    await h.tasks.add(bob, AddTasksArgs(tasks=[TaskSpec(key="api", title="API"), TaskSpec(key="docs", title="Docs")]))
    await h.tasks.claim(bob, ClaimTaskArgs(task_key="api"))
    entry = await h.progress.record(bob, RecordProgressArgs(summary="api started", task_key="api"))
    v1 = await save(h, bob, step=1)
    await save(h, bob, thread="side", step=1)  # two versions go with one entry
    clock.advance(LINK_WINDOW + 60)
    v3 = await save(h, bob, step=2)  # no entry near: linked to api by the hold alone
    await h.tasks.claim(erin, ClaimTaskArgs(task_key="docs"))
    await h.progress.record(erin, RecordProgressArgs(summary="docs outline", task_key="docs"))
    other = await save(h, erin, thread="docs", step=1)

    page = await h.console.task(bob, "api")
    saves = await h.console_links.for_task(bob, "api", page.progress, page.events)
    assert [(s.thread, s.version) for s in saves.versions] == [("main", 2), ("side", 1), ("main", 1)]
    assert {s.checkpoint_id for s in saves.versions} >= {v1, v3} and other not in {
        s.checkpoint_id for s in saves.versions
    }
    assert [(s.thread, s.version) for s in saves.by_entry[entry.seq]] == [("main", 1), ("side", 1)]

    timeline = await h.console.timeline(bob)
    back = await h.console_links.for_entries(bob, timeline.entries)
    assert [(s.thread, s.version) for s in back[entry.seq]] == [("main", 1), ("side", 1)]
    docs_entry = next(e for e in timeline.entries if e.summary == "docs outline")
    assert [s.checkpoint_id for s in back[docs_entry.seq]] == [other]

    # An entry's versions stop at its agent's next entry: a version saved nearer that one goes with it.
    clock.advance(LINK_WINDOW * 3)
    first = await h.progress.record(bob, RecordProgressArgs(summary="first half", task_key="api"))
    clock.advance(200)
    between = await save(h, bob, thread="halves", step=1)
    clock.advance(20)
    second = await h.progress.record(bob, RecordProgressArgs(summary="second half", task_key="api"))
    timeline = await h.console.timeline(bob)
    back = await h.console_links.for_entries(bob, timeline.entries)
    assert first.seq not in back and [s.checkpoint_id for s in back[second.seq]] == [between]

    # Another workspace sees none of it, even with the ids.
    stranger = Identity(f"{workspace}-other", "bob")
    assert await h.console_links.versions(stranger, [v1, v3]) == {}
    assert await h.console_links.for_entries(stranger, timeline.entries) == {}


async def test_a_fork_names_the_version_it_came_from(harness: Harness, workspace: str):
    h, bob = harness, Identity(workspace, "bob")
    first = await save(h, bob, step=1)
    await save(h, bob, step=2)
    fork = await h.checkpoints.save(bob, SaveCheckpointArgs(thread="retry", mode="merge", state={}, fork_from=first))
    shown, _state = await h.console.state(bob, "retry", None)
    assert fork.version == 1 and await h.console_links.forked_from(bob, shown) == ("main", 1)
    main2, _state = await h.console.state(bob, "main", 2)
    assert await h.console_links.forked_from(bob, main2) is None  # an ordinary version's parent is its thread's


def test_a_tie_goes_to_the_entry_written_before_the_save():
    """Record, then save, is the usual order of a session's last steps."""
    before, after = SimpleNamespace(created_at=940.0), SimpleNamespace(created_at=1060.0)
    assert _nearest(1000.0, before, after) is before  # type: ignore[arg-type]
    assert _nearest(1000.0, before, SimpleNamespace(created_at=1059.0)) is not before  # type: ignore[arg-type]
    assert _nearest(1000.0, None, after) is after and _nearest(1000.0, None, None) is None
