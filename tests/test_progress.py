"""The progress log, the resume brief, resources and prompts."""

from __future__ import annotations

import json

import pytest
from support import call, fail, mcp_client

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, RestoreStateArgs, SaveCheckpointArgs, UpdateTaskArgs
from mcp_harness.progress.service import append_entry
from mcp_harness.service import Identity
from mcp_harness.tasks.rules import OPEN
from mcp_harness.tasks.store import tasks as task_store

pytestmark = pytest.mark.anyio


async def test_entries_are_append_only_and_ordered(client):
    seqs = []
    for i in range(4):
        out = await call(client, "record_progress", summary=f"step {i}", status="in_progress")
        assert out["entry_id"].startswith("pg_") and out["created_at"].endswith("Z")
        seqs.append(out["seq"])
    assert seqs == sorted(seqs) and len(set(seqs)) == 4
    brief = await call(client, "restore_state", progress_limit=3)
    assert [e["summary"] for e in brief["recent_progress"]] == ["step 3", "step 2", "step 1"]


async def test_entry_fields_round_trip(client):
    await call(client, "add_tasks", tasks=[{"key": "auth-login", "title": "Login"}])
    await call(
        client,
        "record_progress",
        summary="implemented login",
        status="done",
        details="all 4 steps pass",
        next_steps=["wire logout", "add rate limit"],
        task_key="auth-login",
        artifacts={"files": ["app/login.py"], "commit": "abc123"},
    )
    entry = (await call(client, "restore_state"))["recent_progress"][0]
    assert entry["agent"] == "agent-a" and "thread" not in entry and entry["status"] == "done"
    assert entry["details"] == "all 4 steps pass" and entry["next_steps"] == ["wire logout", "add rate limit"]
    assert entry["task_key"] == "auth-login" and entry["artifacts"] == {"files": ["app/login.py"], "commit": "abc123"}


async def test_recent_progress_is_the_whole_workspace(client):
    """One log per workspace: `thread` on record_progress is a tag; every restore_state, whatever its
    thread, shows the newest entries of all threads, each naming its thread but `main`; the progress
    resource agrees."""
    await call(client, "record_progress", summary="on main")
    await call(client, "record_progress", summary="on docs", thread="docs")
    await call(client, "save_checkpoint", state={"d": 1}, thread="docs")
    main = await call(client, "restore_state")
    docs = await call(client, "restore_state", thread="docs")
    other = await call(client, "restore_state", thread="never-used", progress_limit=1)
    expected = [("on docs", "docs"), ("on main", None)]
    assert [(e["summary"], e.get("thread")) for e in main["recent_progress"]] == expected
    assert docs["recent_progress"] == main["recent_progress"] and docs["state"] == {"d": 1}
    assert [(e["summary"], e.get("thread")) for e in other["recent_progress"]] == expected[:1]
    listed = json.loads((await client.read_resource("harness://progress")).contents[0].text)["progress"]
    assert [(e["seq"], e["summary"], e.get("thread")) for e in listed] == [
        (e["seq"], e["summary"], e.get("thread")) for e in main["recent_progress"]
    ]


async def test_progress_errors(db_url, workspace):
    from mcp_harness.config import Limits

    async with mcp_client(db_url, workspace, limits=Limits(max_text_chars=100)) as client:
        err = await fail(client, "record_progress", summary="x", status="finished")
        assert err.code == "invalid_argument" and err.text.startswith("[invalid_argument] status")
        err = await fail(client, "record_progress", summary="")
        assert err.code == "invalid_argument" and "summary" in err.text
        err = await fail(client, "record_progress", summary="   ")
        assert err.code == "invalid_argument" and "summary" in err.text
        err = await fail(client, "record_progress", summary="y" * 101)
        assert err.code == "too_large" and "limit of 100" in err.text
        assert (await call(client, "restore_state"))["recent_progress"] == []


async def test_idempotent_progress(client):
    a = await call(client, "record_progress", summary="once", idempotency_key="p-1")
    b = await call(client, "record_progress", summary="once", idempotency_key="p-1")
    assert b == {**a, "replayed": True}
    assert len((await call(client, "restore_state", progress_limit=10))["recent_progress"]) == 1
    err = await fail(client, "record_progress", summary="twice", idempotency_key="p-1")
    assert err.code == "invalid_argument"


async def test_first_session_of_a_new_agent_gets_the_brief(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="init") as init:
        await call(init, "add_tasks", tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B"}])
        await call(init, "record_progress", summary="planned", next_steps=["do a"])
    async with mcp_client(db_url, workspace, agent="newcomer") as new:
        brief = await call(new, "restore_state")
        assert brief["found"] is False and brief["state"] is None
        assert brief["recent_progress"][0]["next_steps"] == ["do a"]
        assert brief["task_counts"]["pending"] == 2 and brief["my_tasks"] == []
        got = await call(new, "claim_task")
        brief = await call(new, "restore_state")
        assert brief["my_tasks"][0]["key"] == got["task"]["key"]
        assert brief["my_tasks"][0]["lease"]["token"] == got["lease"]["token"]


@pytest.mark.slow  # builds a big workspace
async def test_brief_stays_small_on_a_big_workspace(harness, workspace):
    """Defaults keep the brief under 4,000 bytes with 1,000 tasks and 10,000 progress entries."""
    ident = Identity(workspace=workspace, agent="a")
    async with harness.db.write() as conn:
        for i in range(10_000):
            await append_entry(
                conn,
                ident,
                summary=f"worked on item {i} and verified it end to end",
                next_steps=[f"item {i + 1}"],
                task_key=f"t{i % 1000}",
            )
    specs = [{"key": f"t{i}", "title": f"Task number {i} of the big plan"} for i in range(1000)]
    from mcp_harness.models import TaskSpec

    await harness.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(**s) for s in specs]))
    await harness.tasks.claim(ident, ClaimTaskArgs())
    await harness.checkpoints.save(ident, SaveCheckpointArgs(state={"goal": "big", "phase": 3}))
    brief = await harness.restore(ident, RestoreStateArgs())
    size = len(brief.model_dump_json())
    assert size < 4000, f"brief is {size} bytes"
    assert len(brief.recent_progress) == 5 and brief.task_counts.pending == 999


async def test_resources_and_prompts(client):
    await call(client, "save_checkpoint", state={"a": 1}, thread="feat/x")
    await call(client, "save_checkpoint", state={"a": 2}, thread="feat/x")
    await call(client, "record_progress", summary="did it")
    await call(client, "add_tasks", tasks=[{"key": "k", "title": "K"}])

    async def read(uri: str):
        result = await client.read_resource(uri)
        return json.loads(result.contents[0].text)

    threads = await read("harness://threads")
    assert threads["threads"][0]["thread"] == "feat/x" and threads["threads"][0]["latest_version"] == 2
    assert (await read("harness://threads/feat%2Fx/state"))["state"] == {"a": 2}
    assert (await read("harness://threads/feat%2Fx/checkpoints/1"))["state"] == {"a": 1}
    assert (await read("harness://progress"))["progress"][0]["summary"] == "did it"
    assert (await read("harness://tasks"))["tasks"][0]["key"] == "k"
    with pytest.raises(Exception, match="not_found"):
        await read("harness://threads/nope/state")

    prompts = {p.name: p for p in (await client.list_prompts()).prompts}
    assert set(prompts) == {"initialize_project", "resume_session"}
    init = await client.get_prompt("initialize_project", {"goal": "build a todo app"})
    text = init.messages[0].content.text
    assert "build a todo app" in text and "add_tasks" in text and "acceptance steps" in text
    assert "restore_state first" in text and "20-200" not in text and "re- adds" not in text
    # revision 3: counts omit zero buckets; a key per request, reused only to retry it
    assert "task_counts is not empty" in text and "fresh idempotency_key (e.g. a UUID)" in text
    resume = await client.get_prompt("resume_session", {"thread": "feat/x"})
    text = resume.messages[0].content.text
    assert 'restore_state(thread="feat/x")' in text and "ONE task" in text and "verification" in text
    # the session discipline of the contract: restore first, task_key on progress, release what you leave
    assert text.index("First call restore_state") < text.index("claim_task") < text.index("Verify")
    assert "task_key set to the task" in text and 'action="release", reason=' in text and "before you stop" in text
    assert "If my_tasks holds a claimed task, continue it" in text  # a task in review is a person's to decide
    assert '"in_review" waits for a person: do not work on it' in text
    assert text.index("Verify") < text.index('action="complete"') and "Before you stop, call save_checkpoint" in text
    assert 'mode "replace" keeps only what state holds' in text


async def test_ready_flags_match_a_full_recomputation(harness, workspace):
    """The maintained ready/blocked flags agree with flags recomputed from scratch."""
    from mcp_harness.models import TaskSpec

    ident = Identity(workspace=workspace, agent="a")
    graph = [("a", []), ("b", ["a"]), ("c", ["a", "b"]), ("d", ["c"]), ("e", [])]
    await harness.tasks.add(
        ident, AddTasksArgs(tasks=[TaskSpec(key=k, title=k, depends_on=d, max_attempts=1) for k, d in graph])
    )
    got = await harness.tasks.claim(ident, ClaimTaskArgs(task_key="a"))
    await harness.tasks.update(
        ident, UpdateTaskArgs(task_key="a", action="complete", lease_token=got.lease.token, verification="v")
    )
    got = await harness.tasks.claim(ident, ClaimTaskArgs(task_key="b"))
    await harness.tasks.update(
        ident, UpdateTaskArgs(task_key="b", action="fail", lease_token=got.lease.token, error="x")
    )
    async with harness.db.read() as conn:
        rows = await task_store.get_many(conn, workspace, ["a", "b", "c", "d", "e"])
        recomputed = await task_store.compute_flags(conn, workspace, list(rows))
    for key, row in rows.items():
        deps_done, blocked = recomputed[key]
        ready = deps_done and row.status in OPEN  # finished tasks are never `ready`
        assert (bool(row.ready), bool(row.blocked)) == (ready, blocked), key
    assert {k: bool(r.ready) for k, r in rows.items()} == {"a": False, "b": False, "c": False, "d": False, "e": True}
    assert recomputed["c"] == (False, True) and recomputed["d"] == (False, True) and recomputed["e"] == (True, False)


async def test_progress_about_a_task_that_does_not_exist_is_refused(client):
    """Revision 3: a mistyped task_key used to be accepted, and the entry never reached the task."""
    await call(client, "add_tasks", tasks=[{"key": "auth-login", "title": "Login"}])
    err = await fail(client, "record_progress", summary="did it", task_key="auth-logn")
    assert err.code == "not_found" and "'auth-logn'" in err.text and "list_tasks" in err.text
    assert (await call(client, "restore_state"))["recent_progress"] == []  # nothing written
    assert "warning" not in await call(client, "record_progress", summary="did it", task_key="auth-login")


async def test_done_about_a_task_still_held_warns_to_complete_it(db_url, workspace):
    """Revision 3: `record_progress(status="done")` completes nothing; said about a task the caller still
    holds, the answer says to complete it (or its lease runs out and the task is retried)."""
    async with mcp_client(db_url, workspace, agent="a") as a, mcp_client(db_url, workspace, agent="b") as b:
        await call(a, "add_tasks", tasks=[{"key": "x", "title": "X"}, {"key": "y", "title": "Y"}])
        x = await call(a, "claim_task", task_key="x")
        await call(b, "claim_task", task_key="y")
        warned = await call(a, "record_progress", summary="x works", status="done", task_key="x")
        assert "update_task(action=complete" in warned["warning"] and "'x'" in warned["warning"]
        assert "expire" in warned["warning"] and warned["seq"] == 1  # the entry is written all the same
        # not about what it says: progress on a held task, done about another agent's, done after complete
        assert "warning" not in await call(a, "record_progress", summary="halfway", status="in_progress", task_key="x")
        assert "warning" not in await call(a, "record_progress", summary="y done?", status="done", task_key="y")
        await call(
            a,
            "update_task",
            task_key="x",
            action="complete",
            lease_token=x["lease"]["token"],
            verification="tests pass",
        )
        assert "warning" not in await call(a, "record_progress", summary="x done", status="done", task_key="x")
