"""Prune while agents save (issue 20, item 1): every state a save acknowledged restores exactly, on
SQLite and PostgreSQL. Prune is held between its manifest scan and its deletes while saves and merge
saves run, so the window in which a save could commit unseen by the scan is wide open every time."""

from __future__ import annotations

import asyncio
import logging

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support import call, run_cli, serve_command, settings_for, subprocess_env

from mcp_harness.arguments import RestoreStateArgs, SaveCheckpointArgs
from mcp_harness.errors import Internal, NotFound
from mcp_harness.maintenance import service as maintenance
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio

THREADS = 6
OLD = 8  #: checkpoints per thread before the prune (prune keeps the last 2)


def blob(n: int) -> str:
    return f"value {n} " + "x" * 400  # above the inline limit: a content-addressed value


def message(n: int) -> dict:
    return {"n": n, "text": "word " * 60}


def old_state(thread: int, version: int) -> dict:
    """Version `version` of a thread before the prune: `old` only in early versions, a long list."""
    state = {"messages": [message(k) for k in range(10 + version)], "v": version}
    state["value"] = blob(thread * 100 + version)
    return state


async def test_prune_racing_saves_loses_no_acknowledged_state(harness: Harness, workspace, monkeypatch):
    agents = [Identity(workspace, f"agent-{t}") for t in range(THREADS)]
    acknowledged: dict[str, dict] = {}  # checkpoint id -> the state its save acknowledged
    latest: dict[int, dict] = {}
    for t, ident in enumerate(agents):
        for version in range(OLD):
            state = old_state(t, version)
            saved = await harness.checkpoints.save(ident, SaveCheckpointArgs(state=state, thread=f"t{t}"))
            acknowledged[saved.checkpoint_id], latest[t] = state, state

    scanned, saves_done = asyncio.Event(), asyncio.Event()
    scan = maintenance.store.manifests

    async def held_scan(conn, name):
        async for text in scan(conn, name):
            yield text
        scanned.set()
        # the window: saves that can commit now (unfixed) do; a fixed prune holds them off, so wait a bit only
        try:
            await asyncio.wait_for(saves_done.wait(), 2)
        except TimeoutError:
            pass

    monkeypatch.setattr(maintenance.store, "manifests", held_scan)

    async def saver(t: int, ident: Identity) -> None:
        await scanned.wait()
        thread = f"t{t}"
        # a replace that brings back a value only pruned checkpoints hold (its INSERT finds it stored)
        state = {**latest[t], "value": blob(t * 100), "v": "back"}
        saved = await harness.checkpoints.save(ident, SaveCheckpointArgs(state=state, thread=thread))
        acknowledged[saved.checkpoint_id], latest[t] = state, state
        # merges that append to the long list (a new segment after the chain's tail) and patch a key
        for k in range(3):
            messages = latest[t]["messages"] + [message(1000 + k)]
            saved = await harness.checkpoints.save(
                ident, SaveCheckpointArgs(state={"messages": messages, "v": k}, thread=thread, mode="merge")
            )
            latest[t] = {**latest[t], "messages": messages, "v": k}
            acknowledged[saved.checkpoint_id] = latest[t]

    async def savers() -> None:
        await asyncio.gather(*(saver(t, ident) for t, ident in enumerate(agents)))
        saves_done.set()

    async with asyncio.TaskGroup() as group:
        group.create_task(savers())
        report = group.create_task(harness.maintenance.prune(keep_last=2, workspace=workspace))
    assert report.result().checkpoints_deleted > 0

    # later saves build on the states the race produced: the hole would be carried forward
    for t, ident in enumerate(agents):
        for k in range(3):
            messages = latest[t]["messages"] + [message(2000 + k)]
            saved = await harness.checkpoints.save(
                ident, SaveCheckpointArgs(state={"messages": messages}, thread=f"t{t}", mode="merge")
            )
            latest[t] = {**latest[t], "messages": messages}
            acknowledged[saved.checkpoint_id] = latest[t]

    broken, restored = [], 0
    for checkpoint_id, state in acknowledged.items():
        ident = agents[0]
        try:
            got = await harness.restore(ident, RestoreStateArgs(checkpoint_id=checkpoint_id))
        except NotFound:
            continue  # pruned, as asked
        except Internal as exc:
            broken.append((checkpoint_id, exc.message))
            continue
        restored += 1
        if got.state != state:
            broken.append((checkpoint_id, "state differs"))
    assert not broken, f"{len(broken)} acknowledged checkpoints do not restore: {broken[:3]}"
    assert restored >= THREADS * 7  # every save since the prune, and the two kept before it
    for t, ident in enumerate(agents):
        assert (await harness.restore(ident, RestoreStateArgs(thread=f"t{t}"))).state == latest[t]


async def test_a_missing_value_is_reported_with_checkpoint_and_value(harness: Harness, workspace, caplog):
    """A restore that finds a value missing says which checkpoint and which value, never the data."""
    ident = Identity(workspace, "a")
    saved = await harness.checkpoints.save(
        ident, SaveCheckpointArgs(state={"value": blob(7), "messages": [message(k) for k in range(30)]})
    )
    async with harness.db.cold_write() as conn:
        await maintenance.store.delete_unreferenced_blobs(conn, workspace, set())
    caplog.set_level(logging.ERROR)
    with pytest.raises(Internal) as raised:
        await harness.restore(ident, RestoreStateArgs())
    assert saved.checkpoint_id in raised.value.message and "missing" in raised.value.message
    logged = "\n".join(r.getMessage() for r in caplog.records)
    assert saved.checkpoint_id in logged and "value 7" not in logged and "value 7" not in raised.value.message


@pytest.mark.slow
async def test_prune_processes_racing_server_processes(db_url, workspace):
    """Three `mcp-harness serve` processes save and merge while `mcp-harness prune` runs in rounds in
    other processes; every acknowledged state that prune did not delete restores exactly."""
    acknowledged: dict[str, dict] = {}
    done = anyio.Event()
    async with Harness.open(settings_for(db_url)):
        pass  # the database exists before the race (prune refuses a file that is not there)

    async def agent(t: int) -> None:
        cmd = serve_command(db_url, workspace, f"agent-{t}")
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=subprocess_env())
        async with Client(params, read_timeout_seconds=120) as client:
            state: dict = {}
            for version in range(40):
                if version % 4 == 0:  # a replace that brings back a value only old checkpoints hold
                    state = {"messages": [message(k) for k in range(10)], "value": blob(t * 100 + version % 8)}
                    saved = await call(client, "save_checkpoint", state=state, thread=f"t{t}")
                else:  # a merge that appends to the long list
                    messages = state["messages"] + [message(version)]
                    saved = await call(
                        client, "save_checkpoint", state={"messages": messages}, thread=f"t{t}", mode="merge"
                    )
                    state = {**state, "messages": messages}
                acknowledged[saved["checkpoint_id"]] = state

    async def pruner() -> None:
        while not done.is_set():
            result = await anyio.to_thread.run_sync(
                lambda: run_cli("prune", "--db", db_url, "--keep-last", "2", "--workspace", workspace)
            )
            assert result.returncode == 0, result.stderr

    with anyio.fail_after(300):
        async with anyio.create_task_group() as group:
            group.start_soon(pruner)
            async with anyio.create_task_group() as agents:
                for t in range(3):
                    agents.start_soon(agent, t)
            done.set()

    async with Harness.open(settings_for(db_url)) as h:
        reader, restored = Identity(workspace, "auditor"), 0
        for checkpoint_id, state in acknowledged.items():
            try:
                got = await h.restore(reader, RestoreStateArgs(checkpoint_id=checkpoint_id))
            except NotFound:
                continue
            assert got.state == state, checkpoint_id
            restored += 1
    assert len(acknowledged) == 120 and restored >= 6
