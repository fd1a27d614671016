"""Long arrays stored as append chains: a save stores what it appended, every version restores exactly,
and prune, export/import and old databases all keep working. On SQLite and PostgreSQL."""

from __future__ import annotations

import json
import sqlite3

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import func, select
from support import call, mcp_client, settings_for, sqlite_at_version

from mcp_harness.arguments import RestoreStateArgs, SaveCheckpointArgs
from mcp_harness.checkpoints import chains as lists
from mcp_harness.checkpoints.chains import CHAIN_MIN_BYTES, SEGMENT_MIN_BYTES
from mcp_harness.maintenance.store.backup import checkpoints, segments
from mcp_harness.service import Harness, Identity
from mcp_harness.store.migrations import SCHEMA_VERSION

pytestmark = pytest.mark.anyio


def message(n: int) -> dict:
    return {"role": "user" if n % 2 else "assistant", "content": f"message {n}: " + "word " * 50, "n": n}


def size(value) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False))


async def segment_stats(h: Harness, workspace: str) -> tuple[int, int]:
    """(segments, bytes of element data) stored for a workspace."""
    async with h.db.cold_read() as conn:
        stmt = select(func.count(), func.coalesce(func.sum(func.length(segments.c.data)), 0)).where(
            segments.c.workspace == workspace
        )
        count, total = (await conn.execute(stmt)).one()
    return int(count), int(total)


async def test_growing_list_stores_each_message_once(db_url, workspace):
    messages = [message(n) for n in range(10)]
    async with mcp_client(db_url, workspace) as c:
        for n in range(10, 70):
            messages.append(message(n))
            await call(c, "save_checkpoint", state={"messages": messages, "turn": n})
        latest = await call(c, "restore_state")
        assert latest["state"] == {"messages": messages, "turn": 69}
        # time travel: an old version holds exactly the list it was saved with
        assert (await call(c, "restore_state", version=25))["state"]["messages"] == messages[:35]
        part = await call(c, "restore_state", paths=["/messages/40/n", "/messages/99"])
        assert part["state"] == {"/messages/40/n": 40} and part["missing_paths"] == ["/messages/99"]
    async with Harness.open(settings_for(db_url)) as h:
        count, stored = await segment_stats(h, workspace)
    # a whole copy per save would be ~60 times the list; stored once, it is the list (plus commas)
    assert stored <= size(messages) and count == 60


async def test_merge_mode_appends_and_object_patches_replace_the_list(harness, workspace):
    ident = Identity(workspace, "a")
    messages = [message(n) for n in range(12)]
    await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"messages": messages, "goal": "g"}))
    for n in range(12, 20):
        messages.append(message(n))
        await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"messages": messages}, mode="merge"))
    assert (await harness.restore(ident, RestoreStateArgs())).state == {"messages": messages, "goal": "g"}
    _, stored = await segment_stats(harness, workspace)
    assert stored <= size(messages)
    # RFC 7396: an object patch onto an array replaces it with the patched empty object
    await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"messages": {"summary": "s"}}, mode="merge"))
    assert (await harness.restore(ident, RestoreStateArgs())).state == {"messages": {"summary": "s"}, "goal": "g"}


async def test_rolling_window_stores_about_the_new_elements(harness, workspace):
    ident = Identity(workspace, "a")
    window = 30
    history = []
    for n in range(200):
        history.append(message(n))
        await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"messages": history[-window:]}))
    for version in (1, 29, 30, 31, 77, 150, 200):
        expect = history[:version][-window:]
        assert (await harness.restore(ident, RestoreStateArgs(version=version))).state == {"messages": expect}
    _, stored = await segment_stats(harness, workspace)
    # rewritten only when the chain would skip more than it keeps: under 3 copies of each message,
    # where a whole copy per save would be `window` copies
    assert stored < 3 * size(history)


async def test_tiny_appends_keep_the_chain_short(harness, workspace):
    ident = Identity(workspace, "a")
    numbers = list(range(1000))  # ~4 KB: a chain from the start
    assert size(numbers) >= CHAIN_MIN_BYTES
    for n in range(1000, 1600):
        numbers.append(n)
        await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"numbers": numbers}))
    assert (await harness.restore(ident, RestoreStateArgs())).state == {"numbers": numbers}
    async with harness.db.cold_read() as conn:
        latest = select(checkpoints.c.manifest).where(checkpoints.c.workspace == workspace, checkpoints.c.version > 599)
        manifest = json.loads((await conn.execute(latest)).scalar_one())
        links = dict((await conn.execute(select(segments.c.id, segments.c.prev))).all())
    tail, length = manifest[0][3], 0
    while tail is not None:
        tail, length = links[tail], length + 1
    # small appends fold into a small tail: the chain stays near size / SEGMENT_MIN_BYTES segments
    assert length <= 2 * size(numbers) // SEGMENT_MIN_BYTES + 2


async def test_prune_keeps_what_live_checkpoints_need(harness, workspace):
    ident = Identity(workspace, "a")
    messages = [message(n) for n in range(10)]
    for n in range(10, 40):
        messages = messages + [message(n)]
        if n == 25:  # a rewrite: the list is replaced by a different one, orphaning the old chain
            messages = [message(1000 + k) for k in range(12)]
        await harness.checkpoints.save(
            ident, SaveCheckpointArgs(state={"messages": messages}, label="kept" if n == 15 else None)
        )
    labelled = (await harness.restore(ident, RestoreStateArgs(label="kept"))).state
    before, _ = await segment_stats(harness, workspace)
    report = await harness.maintenance.prune(keep_last=3, workspace=workspace)
    after, _ = await segment_stats(harness, workspace)
    assert report.checkpoints_deleted == 26 and after < before
    assert (await harness.restore(ident, RestoreStateArgs())).state == {"messages": messages}
    assert (await harness.restore(ident, RestoreStateArgs(label="kept"))).state == labelled
    messages = messages + [message(2000)]  # the chain still grows after a prune
    await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"messages": messages}))
    assert (await harness.restore(ident, RestoreStateArgs())).state == {"messages": messages}


async def test_export_import_renumbers_segments(db_url, workspace, tmp_path):
    ident = Identity(workspace, "a")
    saved = []
    async with Harness.open(settings_for(db_url)) as h:
        messages = [message(n) for n in range(10)]
        for n in range(10, 20):
            messages = messages + [message(n)]
            await h.checkpoints.save(ident, SaveCheckpointArgs(state={"messages": messages[-12:]}))
            saved.append(messages[-12:])
        lines = [line async for line in h.maintenance.export(workspace)]
    assert any('"type":"segment"' in line for line in lines)
    target = f"sqlite+aiosqlite:///{tmp_path / 'busy.db'}"
    async with Harness.open(settings_for(target)) as h:
        # the target already holds segments of another workspace, so exported ids are taken
        await h.checkpoints.save(
            Identity("other", "a"), SaveCheckpointArgs(state={"m": [message(n) for n in range(30)]})
        )
        await h.maintenance.import_lines(lines)
        for version, expect in enumerate(saved, start=1):
            assert (await h.restore(ident, RestoreStateArgs(version=version))).state == {"messages": expect}
        assert (await h.restore(Identity("other", "a"), RestoreStateArgs())).state["m"][29] == message(29)


async def test_a_version_1_database_is_upgraded_in_place(sqlite_url, workspace, tmp_path):
    ident = Identity(workspace, "a")
    made = f"sqlite+aiosqlite:///{tmp_path / 'current.db'}"
    async with Harness.open(settings_for(made)) as h:
        await h.checkpoints.save(ident, SaveCheckpointArgs(state={"kept": [1, 2, 3]}, label="old"))
    path = sqlite_url.split("///", 1)[1]
    sqlite_at_version(path, made.split("///", 1)[1], 1)  # the layout version 1 created, with those rows
    async with Harness.open(settings_for(sqlite_url)) as h:
        assert (await h.restore(ident, RestoreStateArgs(label="old"))).state == {"kept": [1, 2, 3]}
        messages = [message(n) for n in range(20)]
        await h.checkpoints.save(ident, SaveCheckpointArgs(state={"messages": messages}))
        assert (await h.restore(ident, RestoreStateArgs())).state == {"messages": messages}
    with sqlite3.connect(path) as raw:
        (sql,) = raw.execute("SELECT sql FROM sqlite_master WHERE name = 'ix_checkpoint_label'").fetchone()
        assert "label IS NOT NULL" in sql
        version = raw.execute("SELECT value FROM harness_meta WHERE key = 'schema_version'").fetchone()
        assert version == (str(SCHEMA_VERSION),)


# Elements chosen to confuse a byte-level search: commas and brackets inside strings, nested arrays
# and objects that contain the same bytes as neighbouring elements.
ELEMENT = st.one_of(
    st.integers(-5, 5),
    st.sampled_from(["a", "a,b", "]", ",[", '"', "x" * 90]),
    st.lists(st.sampled_from([1, "a", "a,b", None]), max_size=3),
    st.dictionaries(st.sampled_from(["k", "a,b"]), st.sampled_from([1, "]", [1, 2]]), max_size=2),
)
STEP = st.one_of(
    st.tuples(st.just("append"), st.lists(ELEMENT, min_size=1, max_size=40)),
    st.tuples(st.just("drop"), st.integers(1, 60)),
    st.tuples(st.just("roll"), st.integers(1, 10), st.lists(ELEMENT, min_size=0, max_size=10)),
    st.tuples(st.just("truncate"), st.integers(1, 10)),
    st.tuples(st.just("edit"), st.integers(0, 500), ELEMENT),
    st.tuples(
        st.just("same"),
    ),
)


def apply(value: list, step: tuple) -> list:
    kind = step[0]
    if kind == "append":
        return value + step[1]
    if kind == "drop":
        return value[step[1] :]
    if kind == "roll":
        return value[step[1] :] + step[2]
    if kind == "truncate":
        return value[: -step[1]] if len(value) > step[1] else value
    if kind == "edit" and value:
        edited = list(value)
        edited[step[1] % len(value)] = step[2]
        return edited
    return value


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(start=st.lists(ELEMENT, min_size=0, max_size=60), steps=st.lists(STEP, max_size=12))
async def test_every_version_restores_exactly(harness, workspace, monkeypatch, start, steps):
    """Whatever is done to a list between saves, every version restores to exactly what was saved:
    a wrong boundary (a comma inside a string, a bracket inside an object) would show here. Small
    thresholds put every list on a chain and make folding and rewriting frequent."""
    monkeypatch.setattr(lists, "CHAIN_MIN_BYTES", 8)
    monkeypatch.setattr(lists, "SEGMENT_MIN_BYTES", 24)
    monkeypatch.setattr(lists, "_PROBE", 4)
    ident = Identity(workspace, "prop")
    thread = f"t{abs(hash((repr(start), repr(steps)))) % 10**9}"
    history, value = [], list(start)
    for step in [("same",), *steps]:
        value = apply(value, step)
        saved = await harness.checkpoints.save(
            ident, SaveCheckpointArgs(state={"v": value, "pad": len(value)}, thread=thread)
        )
        history.append((saved.version, value))
    for version, expect in history:
        assert (await harness.restore(ident, RestoreStateArgs(thread=thread, version=version))).state == {
            "v": expect,
            "pad": len(expect),
        }
