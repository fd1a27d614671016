"""Checkpoints through the official MCP client against the real server, on SQLite and PostgreSQL."""

from __future__ import annotations

import json

import pytest
from support import call, fail, mcp_client

from mcp_harness.arguments import ListCheckpointsArgs, RestoreStateArgs, SaveCheckpointArgs

pytestmark = pytest.mark.anyio


async def test_versions_parents_and_restore_latest(client):
    first = await call(client, "save_checkpoint", state={"goal": "ship", "n": 1})
    second = await call(client, "save_checkpoint", state={"goal": "ship", "n": 2}, label="two")
    assert (first["version"], second["version"]) == (1, 2)
    assert first["parent_id"] is None and second["parent_id"] == first["checkpoint_id"]
    assert first["created_at"].endswith("Z") and first["size_bytes"] == len(b'{"goal":"ship","n":1}')
    brief = await call(client, "restore_state")
    assert brief["found"] is True
    assert brief["state"] == {"goal": "ship", "n": 2}
    assert brief["checkpoint"]["version"] == 2 and brief["checkpoint"]["label"] == "two"
    assert brief["checkpoint"]["agent"] == "agent-a"


async def test_restore_by_version_id_and_label(client):
    a = await call(client, "save_checkpoint", state={"v": "a"}, label="stable")
    await call(client, "save_checkpoint", state={"v": "b"}, label="stable")
    await call(client, "save_checkpoint", state={"v": "c"})
    assert (await call(client, "restore_state", version=1))["state"] == {"v": "a"}
    assert (await call(client, "restore_state", checkpoint_id=a["checkpoint_id"]))["state"] == {"v": "a"}
    # Labels need not be unique: the newest checkpoint with the label wins.
    assert (await call(client, "restore_state", label="stable"))["state"] == {"v": "b"}


async def test_threads_are_independent(client):
    await call(client, "save_checkpoint", state={"x": 1})
    other = await call(client, "save_checkpoint", state={"y": 2}, thread="feature/login")
    assert other["version"] == 1 and other["thread"] == "feature/login"
    assert (await call(client, "restore_state", thread="feature/login"))["state"] == {"y": 2}
    assert (await call(client, "restore_state"))["state"] == {"x": 1}


async def test_merge_mode_applies_rfc7396(client):
    await call(client, "save_checkpoint", state={"a": {"b": 1, "c": 2}, "keep": [1, 2], "gone": True})
    await call(client, "save_checkpoint", mode="merge", state={"a": {"c": None, "d": 3}, "gone": None, "new": "x"})
    state = (await call(client, "restore_state"))["state"]
    assert state == {"a": {"b": 1, "d": 3}, "keep": [1, 2], "new": "x"}


async def test_merge_onto_empty_thread_and_replace_of_non_object(client):
    await call(client, "save_checkpoint", mode="merge", state={"a": {"b": None, "c": 1}})
    assert (await call(client, "restore_state"))["state"] == {"a": {"c": 1}}
    await call(client, "save_checkpoint", mode="merge", state={"a": [1, 2]})
    assert (await call(client, "restore_state"))["state"] == {"a": [1, 2]}


async def test_expected_version_optimistic_concurrency(client):
    await call(client, "save_checkpoint", state={"n": 0}, expected_version=0)
    err = await fail(client, "save_checkpoint", state={"n": 1}, expected_version=0)
    assert err.code == "version_conflict"
    assert "thread 'main' is at version 1, you expected 0" in err.text
    assert "restore_state" in err.text and "retry with expected_version=1" in err.text
    ok = await call(client, "save_checkpoint", state={"n": 1}, expected_version=1)
    assert ok["version"] == 2
    assert (await call(client, "restore_state"))["state"] == {"n": 1}


async def test_paths_return_only_requested_parts(client):
    await call(
        client, "save_checkpoint", state={"a": {"b": [10, 20, {"c": "x"}]}, "s/l": 1, "t~": 2, "big": "z" * 1000}
    )
    brief = await call(client, "restore_state", paths=["/a/b/2/c", "/s~1l", "/t~0", "/nope", "/a/b/9"])
    assert brief["state"] == {"/a/b/2/c": "x", "/s~1l": 1, "/t~0": 2}
    assert brief["missing_paths"] == ["/nope", "/a/b/9"]
    for bad in ("a/b", ""):
        err = await fail(client, "restore_state", paths=[bad])
        assert err.code == "invalid_argument" and "must start with '/'" in err.text


async def test_list_checkpoints_pages_newest_first(client):
    for i in range(5):
        await call(client, "save_checkpoint", state={"i": i}, metadata={"step": i})
    page = await call(client, "list_checkpoints", limit=2)
    assert [c["version"] for c in page["checkpoints"]] == [5, 4]
    assert page["checkpoints"][0]["metadata"] == {"step": 4}
    assert "state" not in page["checkpoints"][0]
    page2 = await call(client, "list_checkpoints", limit=2, before_version=page["next_before_version"])
    assert [c["version"] for c in page2["checkpoints"]] == [3, 2]
    page3 = await call(client, "list_checkpoints", limit=2, before_version=page2["next_before_version"])
    assert [c["version"] for c in page3["checkpoints"]] == [1]
    assert page3["next_before_version"] is None


async def test_listing_rows_are_exactly_what_validation_would_build(harness, workspace):
    """A listing is built from the store's typed columns without validating each row: every field
    must still have its declared type and match what a restore by version says."""
    from mcp_harness.models import CheckpointMeta, ListCheckpointsResult
    from mcp_harness.service import Identity

    ident = Identity(workspace=workspace, agent="a")
    saved = [await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"i": 0}, label='quote " back\\ é\u2028'))]
    await harness.schemas.set_schema(ident, "main", {"type": "object"})
    for i in range(1, 4):
        metadata = {"step": i, "nested": {"xs": [1.5, None, "s"]}} if i % 2 else None
        saved.append(await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"i": i}, metadata=metadata)))
    page = await harness.checkpoints.list(ident, ListCheckpointsArgs(limit=200))
    # strict: an int that came back as a float, or a str as bytes, fails here
    assert ListCheckpointsResult.model_validate_json(page.model_dump_json(), strict=True) == page
    assert [c.created_at for c in page.checkpoints] == [s.created_at for s in reversed(saved)]
    assert [c.schema_version for c in page.checkpoints] == [1, 1, 1, None]
    for listed in page.checkpoints:
        restored = (await harness.restore(ident, RestoreStateArgs(version=listed.version))).checkpoint
        assert CheckpointMeta(**{f: getattr(restored, f) for f in CheckpointMeta.__dataclass_fields__}) == listed


async def test_nothing_saved_yet_is_not_an_error(client):
    brief = await call(client, "restore_state")
    assert brief["found"] is False and brief["state"] is None and brief["checkpoint"] is None
    assert (await call(client, "list_checkpoints"))["checkpoints"] == []


async def test_unknown_version_id_or_label_is_not_found(client):
    await call(client, "save_checkpoint", state={"a": 1})
    for args, words in (
        ({"version": 7}, "version 7"),
        ({"checkpoint_id": "ck_missing"}, "checkpoint_id 'ck_missing'"),
        ({"label": "nope"}, "label 'nope'"),
    ):
        err = await fail(client, "restore_state", **args)
        assert err.code == "not_found" and words in err.text


async def test_size_limit_counts_the_merged_state_and_stores_nothing(db_url, workspace):
    async with mcp_client(db_url, workspace, limits=_limits(max_state_bytes=200)) as client:
        await call(client, "save_checkpoint", state={"a": "x" * 100})
        err = await fail(client, "save_checkpoint", mode="merge", state={"b": "y" * 100})
        assert err.code == "too_large" and "over the limit of 200 bytes" in err.text
        err = await fail(client, "save_checkpoint", state={"c": "z" * 300})
        assert err.code == "too_large"
        listing = await call(client, "list_checkpoints")
        assert [c["version"] for c in listing["checkpoints"]] == [1]


async def test_idempotent_save_returns_first_result_and_stores_once(client):
    first = await call(client, "save_checkpoint", state={"a": 1}, idempotency_key="k1")
    again = await call(client, "save_checkpoint", state={"a": 1}, idempotency_key="k1")
    assert again == {**first, "replayed": True} and "replayed" not in first
    assert len((await call(client, "list_checkpoints"))["checkpoints"]) == 1
    err = await fail(client, "save_checkpoint", state={"a": 2}, idempotency_key="k1")
    assert err.code == "invalid_argument" and "idempotency_key 'k1'" in err.text
    # Keys are per agent: another agent's identical key is independent.


async def test_idempotency_keys_are_scoped_per_agent(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="a") as a, mcp_client(db_url, workspace, agent="b") as b:
        one = await call(a, "save_checkpoint", state={"x": 1}, idempotency_key="same")
        two = await call(b, "save_checkpoint", state={"x": 1}, idempotency_key="same")
        assert (one["version"], two["version"]) == (1, 2)


async def test_failed_call_is_not_remembered(client):
    await call(client, "save_checkpoint", state={"a": 1})
    err = await fail(client, "save_checkpoint", state={"a": 2}, expected_version=5, idempotency_key="k")
    assert err.code == "version_conflict"
    ok = await call(client, "save_checkpoint", state={"a": 2}, expected_version=1, idempotency_key="k")
    assert ok["version"] == 2


async def test_storage_grows_with_what_changed(harness, workspace):
    """A save that changes one key of three stores one new value, not a copy of the state."""
    from mcp_harness.service import Identity

    ident = Identity(workspace=workspace, agent="a")
    big = {"docs": "d" * 20_000, "notes": "n" * 20_000, "counter": 0}
    await harness.checkpoints.save(ident, SaveCheckpointArgs(state=big))
    before = await _blob_bytes(harness, workspace)
    for i in range(1, 11):
        await harness.checkpoints.save(ident, SaveCheckpointArgs(state={**big, "counter": i}))
    grown = await _blob_bytes(harness, workspace) - before
    assert grown < 200, f"10 one-key saves stored {grown} bytes of values"
    brief = await harness.restore(ident, RestoreStateArgs())
    assert brief.state == {**big, "counter": 10}


async def test_results_are_compact_json_text(client):
    result = await client.call_tool("save_checkpoint", {"state": {"a": 1}})
    text = result.content[0].text
    assert json.loads(text) == result.structured_content
    assert "\n" not in text and ": " not in text


def _limits(**kw):
    from mcp_harness.config import Limits

    return Limits(**{**Limits().__dict__, **kw})


async def _blob_bytes(harness, workspace: str) -> int:
    from sqlalchemy import func, select

    from mcp_harness.maintenance.store.backup import blobs

    async with harness.db.cold_read() as conn:
        stmt = select(func.coalesce(func.sum(func.length(blobs.c.data)), 0)).where(blobs.c.workspace == workspace)
        return int((await conn.execute(stmt)).scalar_one())


async def test_small_values_live_in_the_manifest(harness, workspace):
    """A counter or a status is kept inline in the checkpoint's manifest: no value row per save, and
    every version, merge and pointer read still sees it."""
    from mcp_harness.service import Identity

    ident = Identity(workspace, "a")
    for i in range(20):
        await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"n": i, "status": "running", "tags": ["a", i]}))
    await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"n": None, "extra": {"k": 1}}, mode="merge"))
    assert await _blob_bytes(harness, workspace) == 0
    assert (await harness.restore(ident, RestoreStateArgs(version=7))).state == {
        "n": 6,
        "status": "running",
        "tags": ["a", 6],
    }
    latest = await harness.restore(ident, RestoreStateArgs(paths=["/tags/1", "/extra/k", "/n"]))
    assert latest.state == {"/tags/1": 19, "/extra/k": 1} and latest.missing_paths == ["/n"]
    await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"extra": {"j": 2}}, mode="merge"))
    assert (await harness.restore(ident, RestoreStateArgs())).state == {
        "status": "running",
        "tags": ["a", 19],
        "extra": {"k": 1, "j": 2},
    }


async def test_object_arguments_sent_as_json_text_are_accepted(client):
    # Some clients (Claude Desktop among them) send object and list arguments as JSON strings.
    saved = await client.call_tool("save_checkpoint", {"state": '{"plan": ["a", "b"]}', "metadata": '{"by": "x"}'})
    assert not saved.is_error, saved.content
    restored = await client.call_tool("restore_state", {"paths": '["/plan/1"]'})
    assert restored.structured_content["state"] == {"/plan/1": "b"}
    bad = await client.call_tool("save_checkpoint", {"state": "[1, 2]"})
    assert bad.is_error and bad.content[0].text.startswith("[invalid_argument] state:")


async def test_replace_names_the_top_level_keys_it_dropped(client):
    """Revision 3: a replace that drops keys of the state it follows says which (a default `replace`
    once wiped a thread's goal and conventions with nothing said); merge and a first save say nothing."""
    first = await call(client, "save_checkpoint", state={"goal": "ship", "repo": "r", "conventions": ["c"], "n": 1})
    assert "dropped_keys" not in first
    second = await call(client, "save_checkpoint", state={"n": 2, "new": True})
    assert second["dropped_keys"] == ["goal", "repo", "conventions"]
    kept = await call(client, "save_checkpoint", state={"n": 3, "new": False})
    assert "dropped_keys" not in kept
    merged = await call(client, "save_checkpoint", state={"new": None}, mode="merge")  # a merge deletes on purpose
    assert "dropped_keys" not in merged
    # at most 20, in the order of the state they were dropped from
    await call(client, "save_checkpoint", state={f"k{i:02d}": i for i in range(30)})
    many = await call(client, "save_checkpoint", state={})
    assert many["dropped_keys"] == [f"k{i:02d}" for i in range(20)]
    # a fork in replace mode names what it did not carry over from the checkpoint it forks
    fork = await call(client, "save_checkpoint", thread="f", fork_from=first["checkpoint_id"], state={"goal": "g"})
    assert fork["dropped_keys"] == ["repo", "conventions", "n"]


async def test_the_mode_argument_warns_that_replace_keeps_only_the_state_given(client):
    tools = {t.name: t for t in (await client.list_tools()).tools}
    mode = tools["save_checkpoint"].input_schema["properties"]["mode"]["description"]
    assert mode.startswith("replace keeps only what state holds") and "merge" in mode
