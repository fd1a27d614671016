"""`save_checkpoint(fork_from=...)`: a new thread that starts from any checkpoint of the workspace."""

from __future__ import annotations

import pytest
from support import call, fail, mcp_client

pytestmark = pytest.mark.anyio


async def test_fork_starts_a_thread_at_version_1_from_the_checkpoint(client):
    long = [f"item {i:04d}" for i in range(400)]  # long enough to be stored as a chain of segments
    first = await call(client, "save_checkpoint", state={"goal": "ship", "plan": {"a": 1, "b": 2}, "log": long})
    await call(client, "save_checkpoint", state={"goal": "changed later"})
    fork = await call(
        client,
        "save_checkpoint",
        thread="try-b",
        fork_from=first["checkpoint_id"],
        mode="merge",
        state={"plan": {"b": None, "c": 3}, "log": [*long, "forked"]},
    )
    assert fork["version"] == 1 and fork["thread"] == "try-b" and fork["parent_id"] == first["checkpoint_id"]
    got = await call(client, "restore_state", thread="try-b")
    assert got["state"] == {"goal": "ship", "plan": {"a": 1, "c": 3}, "log": [*long, "forked"]}
    assert got["checkpoint"]["parent_id"] == first["checkpoint_id"] and got["checkpoint"]["version"] == 1
    # The fork's next save is an ordinary one; the source thread is untouched.
    nxt = await call(client, "save_checkpoint", thread="try-b", mode="merge", state={"n": 2}, expected_version=1)
    assert nxt["version"] == 2 and nxt["parent_id"] == fork["checkpoint_id"]
    assert (await call(client, "restore_state", version=1))["state"]["log"] == long
    assert (await call(client, "restore_state"))["state"] == {"goal": "changed later"}
    # replace: the fork names its origin, the state is the one given
    other = await call(
        client, "save_checkpoint", thread="try-c", fork_from=fork["checkpoint_id"], state={"x": 1}, expected_version=0
    )
    assert other["version"] == 1 and other["parent_id"] == fork["checkpoint_id"]
    assert (await call(client, "restore_state", thread="try-c"))["state"] == {"x": 1}


async def test_fork_refusals(db_url, workspace):
    async with mcp_client(db_url, workspace) as client:
        src = await call(client, "save_checkpoint", state={"a": 1})
        await call(client, "save_checkpoint", state={"b": 1}, thread="busy")
        err = await fail(client, "save_checkpoint", thread="busy", fork_from=src["checkpoint_id"], state={})
        assert err.code == "invalid_argument" and "'busy' already has 1 checkpoint" in err.text
        err = await fail(
            client, "save_checkpoint", thread="new", fork_from=src["checkpoint_id"], state={}, expected_version=3
        )
        assert err.code == "invalid_argument" and "expected_version must be 0" in err.text
        err = await fail(client, "save_checkpoint", thread="new", fork_from="ck_nope", state={})
        assert err.code == "not_found" and "'ck_nope'" in err.text
        assert (await call(client, "restore_state", thread="new"))["found"] is False  # nothing was stored
    async with mcp_client(db_url, f"{workspace}-other") as other:  # another workspace's id is unknown here
        err = await fail(other, "save_checkpoint", thread="new", fork_from=src["checkpoint_id"], state={})
        assert err.code == "not_found"


async def test_fork_is_idempotent(client):
    src = await call(client, "save_checkpoint", state={"a": 1})
    args = {"thread": "f", "fork_from": src["checkpoint_id"], "mode": "merge", "state": {"b": 2}}
    first = await call(client, "save_checkpoint", idempotency_key="fork-1", **args)
    again = await call(client, "save_checkpoint", idempotency_key="fork-1", **args)
    assert again == {**first, "replayed": True}
    assert (await call(client, "list_checkpoints", thread="f"))["checkpoints"][0]["version"] == 1
    err = await fail(client, "save_checkpoint", idempotency_key="fork-1", **{**args, "fork_from": None})
    assert err.code == "invalid_argument"
    # without a key, the retry is refused: the thread has its checkpoint now
    err = await fail(client, "save_checkpoint", **args)
    assert err.code == "invalid_argument" and "already has 1 checkpoint" in err.text
