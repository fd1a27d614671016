"""A lease taken through a stdio server whose process is gone (killed without a word) ends at the next
look, as a connection's end ends it; `waiting_on` says how long a holder has been silent and whether its
process still runs."""

from __future__ import annotations

import signal
import subprocess

import anyio
import pytest
from support import settings_for
from test_connection_leases import _claim_now, _plan, claim_in_process

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, ListTasksArgs, UpdateTaskArgs
from mcp_harness.errors import LeaseLost
from mcp_harness.service import Harness, Identity
from mcp_harness.sessions import machine, process_key, this_process

pytestmark = pytest.mark.anyio

GONE = 2**22 + 7  # above the default pid_max: never a running process


async def test_a_lease_whose_process_is_gone_ends_at_the_next_claim(db_url, workspace):
    await _plan(db_url, workspace)
    async with Harness.open(settings_for(db_url)) as h:
        dead = Identity(workspace, "ann", process=f"{machine()}/{GONE}-1")
        assert (await h.tasks.claim(dead, ClaimTaskArgs(task_key="a", lease_seconds=3600))).task is not None
        taken = await h.tasks.claim(Identity(workspace, "bob"), ClaimTaskArgs())
        assert taken.task is not None and taken.task.key == "a" and taken.lease.attempt == 2, taken
        texts = [n.text for n in taken.task.context.notes]
        assert any(f"its process ended (pid {GONE} is gone)" in t for t in texts), texts


async def test_its_old_token_is_told_the_lease_ended_with_its_process_not_that_it_expired(db_url, workspace):
    await _plan(db_url, workspace)
    async with Harness.open(settings_for(db_url)) as h:
        dead = Identity(workspace, "ann", process=f"{machine()}/{GONE}-1")
        token = (await h.tasks.claim(dead, ClaimTaskArgs(task_key="a", lease_seconds=3600))).lease.token
        assert (await h.tasks.claim(Identity(workspace, "bob"), ClaimTaskArgs())).task is not None
        with pytest.raises(LeaseLost) as lost:
            await h.tasks.update(
                Identity(workspace, "ann"), UpdateTaskArgs(task_key="a", action="heartbeat", lease_token=token)
            )
    said = lost.value.message
    assert f"the lease ended (its process ended (pid {GONE} is gone)) and agent 'bob' took the task over" in said
    assert "expired" not in said, said


async def test_a_list_ends_it_too_and_a_live_process_keeps_its_lease(db_url, workspace):
    await _plan(db_url, workspace)
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(Identity(workspace, "planner"), AddTasksArgs(tasks=[{"key": "b", "title": "B"}]))
        await h.tasks.claim(Identity(workspace, "ann", process=f"{machine()}/{GONE}-1"), ClaimTaskArgs(task_key="a"))
        await h.tasks.claim(Identity(workspace, "cy", process=this_process()), ClaimTaskArgs(task_key="b"))
        listed = await h.tasks.list(Identity(workspace, "bob"), ListTasksArgs(status="claimed"))
        rows = {t.key: t for t in listed.tasks}
        assert rows["b"].owner == "cy"  # alive: untouched
        got = await h.tasks.claim(Identity(workspace, "bob"), ClaimTaskArgs(task_key="a"))
        assert got.task is not None  # the list ended ann's lease: claimable now
        nothing = await h.tasks.claim(Identity(workspace, "dee"), ClaimTaskArgs())
        assert nothing.reason == "all_claimed", nothing
        by_key = {w.key: w for w in nothing.waiting_on or []}
        assert by_key["b"].alive is True and by_key["a"].alive is None  # bob claimed in-process: unknown
        shown = nothing.model_dump(mode="json")["waiting_on"]
        assert all("alive" in w for w in shown), shown


@pytest.mark.slow
async def test_a_waiting_claim_takes_the_task_of_a_holder_killed_meanwhile(db_url, workspace):
    """Nothing commits when a holder is killed without a word, so no change wakes a waiting claim: the wait
    itself looks for holders whose process is gone, and takes the task within a few seconds, not at the
    end of its wait."""
    await _plan(db_url, workspace)
    holder = subprocess.Popen(["sleep", "300"])
    try:
        async with Harness.open(settings_for(db_url)) as h:
            ann = Identity(workspace, "ann", process=f"{machine()}/{process_key(holder.pid)}")
            assert (await h.tasks.claim(ann, ClaimTaskArgs(task_key="a", lease_seconds=3600))).task is not None
            async with anyio.create_task_group() as tg:

                async def kill_soon() -> None:
                    await anyio.sleep(1.0)
                    holder.kill()
                    holder.wait(timeout=30)

                tg.start_soon(kill_soon)
                started = anyio.current_time()
                taken = await h.tasks.claim(Identity(workspace, "bob"), ClaimTaskArgs(task_key="a", wait_seconds=30))
                waited = anyio.current_time() - started
            assert taken.task is not None and taken.lease.attempt == 2, taken
            assert waited < 20, f"the claim waited {waited:.1f} s for a holder that died after 1 s"
    finally:
        holder.kill()
        holder.wait(timeout=30)


@pytest.mark.slow
async def test_a_sigkilled_holder_hands_its_task_on_at_once(db_url, workspace):
    await _plan(db_url, workspace)
    proc, _ = claim_in_process(db_url, workspace, "ann")
    held = await _claim_now(db_url, workspace, "bob")
    assert held.task is None and held.reason == "all_claimed"
    (entry,) = held.waiting_on or []
    assert entry.owner == "ann" and entry.alive is True and entry.silent_seconds is not None, entry
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    taken = await _claim_now(db_url, workspace, "bob")  # at once, not after the hour-long lease
    assert taken.task is not None and taken.lease.attempt == 2, taken
    assert any("its process ended" in n.text for n in taken.task.context.notes), taken.task.context
