"""What a task's `context` carries beyond its own notes: the results of what it depends on however far
down (nearest first, each once, within 2,000 bytes), agents' next steps with their notes, and a reopened
task's previous result. Through the official MCP client on SQLite and PostgreSQL, and the service."""

from __future__ import annotations

import json

import pytest
from support import call, mcp_client, settings_for

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.service import Harness, Identity
from mcp_harness.tasks.context import DEPTH, FARTHER, MAX_BYTES, task_context
from mcp_harness.tasks.store import tasks as store

pytestmark = pytest.mark.anyio


def t(key: str, **kw) -> dict:
    return {"key": key, "title": f"task {key}", **kw}


def size(value: object) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


async def done(client, key: str, result: object = None, verification: str = "tested") -> None:
    got = await call(client, "claim_task", task_key=key)
    assert got["task"]["key"] == key, got
    extra = {"result": result} if result is not None else {}
    await call(
        client,
        "update_task",
        task_key=key,
        action="complete",
        lease_token=got["lease"]["token"],
        verification=verification,
        **extra,
    )


async def test_the_core_result_reaches_the_tasks_built_on_what_is_built_on_it(db_url, workspace):
    """core <- api <- (cli, docs) <- release: release's context holds cli and docs (its own, in the
    order it names them), then core and api (two steps away both: oldest first), each once, with their
    results."""
    async with mcp_client(db_url, workspace, agent="a") as a:
        plan = [
            t("core"),
            t("api", depends_on=["core"]),
            t("docs", depends_on=["api", "core"]),
            t("cli", depends_on=["api"]),
            t("release", depends_on=["docs", "cli"]),
        ]
        await call(a, "add_tasks", tasks=plan)
        for key in ("core", "api", "cli", "docs"):
            await done(a, key, result={"made": key})
        got = await call(a, "claim_task", task_key="release")
        deps = got["task"]["context"]["dependencies"]
        assert [(d["key"], d["result"]) for d in deps] == [
            ("docs", {"made": "docs"}),
            ("cli", {"made": "cli"}),
            ("core", {"made": "core"}),
            ("api", {"made": "api"}),
        ]
        assert size(got["task"]["context"]) <= MAX_BYTES
        [row] = (await call(a, "list_tasks", task_key="release"))["tasks"]
        assert [d["key"] for d in row["context"]["dependencies"]] == ["docs", "cli", "core", "api"]


async def test_notes_carry_next_steps_and_a_reopen_keeps_the_previous_result(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="a") as a, mcp_client(db_url, workspace, agent="b") as b:
        await call(a, "add_tasks", tasks=[t("lengths")])
        await done(a, "lengths", result={"commit": "bbe720c", "max": 80})
        await call(a, "update_task", task_key="lengths", action="reopen", reason="80 is too short")
        got = await call(b, "claim_task", task_key="lengths")
        assert got["task"]["context"]["previous_result"] == {"commit": "bbe720c", "max": 80}
        await call(
            b,
            "record_progress",
            summary="started on 120",
            task_key="lengths",
            next_steps=["change the limit", "  rerun   the tests  ", "x" * 400],
        )
        await call(
            b,
            "update_task",
            task_key="lengths",
            action="release",
            lease_token=got["lease"]["token"],
            reason="out of time",
        )
        context = (await call(a, "claim_task", task_key="lengths"))["task"]["context"]
        assert context["previous_result"] == {"commit": "bbe720c", "max": 80}
        [note] = [n for n in context["notes"] if n["text"] == "started on 120"]
        assert note["next"].startswith("change the limit; rerun the tests; xxx") and note["next"].endswith("…")
        assert len(note["next"]) == 301
        assert all("next" not in n for n in context["notes"] if n is not note), "only an entry with next steps"
        assert size(context) <= MAX_BYTES


async def test_a_long_previous_result_is_cut_and_a_task_done_again_has_none(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="a") as a:
        await call(a, "add_tasks", tasks=[t("x")])
        await done(a, "x", result={"log": "r" * 500})
        await call(a, "update_task", task_key="x", action="reopen", reason="again")
        [row] = (await call(a, "list_tasks", task_key="x"))["tasks"]
        assert row["context"]["previous_result"] == {"log": "r" * 500}, "list_tasks(task_key=K) shows it whole"
        got = await call(a, "claim_task", task_key="x")
        previous = got["task"]["context"]["previous_result"]
        assert isinstance(previous, str) and previous.startswith('{"log":"rrr') and len(previous) == 301
        await call(
            a,
            "update_task",
            task_key="x",
            action="complete",
            lease_token=got["lease"]["token"],
            verification="ok",
            result={"log": "new"},
        )
        [row] = (await call(a, "list_tasks", task_key="x", status="done"))["tasks"]
        assert "previous_result" not in (row.get("context") or {})


async def test_the_bound_keeps_the_near_dependencies_and_counts_the_far(db_url, workspace):
    """A long chain under a task with six long direct results: within 2,000 bytes, the direct ones all
    present (their results cut, never dropped for farther ones), farther ones nearest first, the rest
    counted; the read is bounded (`DEPTH` steps, `FARTHER` beyond the direct ones)."""
    me = Identity(workspace, "ann")
    async with Harness.open(settings_for(db_url)) as h:
        chain = [{"key": "c0", "title": "c"}] + [
            {"key": f"c{i}", "title": "c", "depends_on": [f"c{i - 1}"]} for i in range(1, 30)
        ]
        direct = [{"key": f"d{i}", "title": "d", "depends_on": ["c29"]} for i in range(6)]
        await h.tasks.add(
            me,
            AddTasksArgs(
                tasks=[*chain, *direct, {"key": "top", "title": "T", "depends_on": [d["key"] for d in direct]}]
            ),
        )
        for spec in [*chain, *direct]:
            got = await h.tasks.claim(me, ClaimTaskArgs(task_key=spec["key"]))
            await h.tasks.update(
                me,
                UpdateTaskArgs(
                    task_key=spec["key"],
                    action="complete",
                    lease_token=got.lease.token,
                    result={"text": spec["key"] + " " + "r" * 300},
                    verification="v" * 200,
                ),
            )
        async with h.db.read() as conn:
            row = await store.get(conn, workspace, "top")
            bounded = await task_context(conn, workspace, row)
            full = await task_context(conn, workspace, row, full=True)
        shown = bounded.model_dump(mode="json")
        assert size(shown) <= MAX_BYTES, size(shown)
        keys = [d.key for d in bounded.dependencies]
        assert keys[:6] == [f"d{i}" for i in range(6)] and keys[6:] == [f"c{29 - i}" for i in range(len(keys) - 6)]
        far = min(FARTHER, DEPTH - 1)  # the chain is read `DEPTH` steps down at most, `FARTHER` tasks at most
        assert bounded.more_dependencies == 6 + far - len(keys)
        assert all(isinstance(d.result, str) and d.cut for d in bounded.dependencies[:6])
        assert [d.key for d in full.dependencies] == [f"d{i}" for i in range(6)] + [f"c{29 - i}" for i in range(far)]


async def test_the_previous_result_outlasts_a_run_of_agent_entries(db_url, workspace):
    """The reopen's harness note is no longer among the task's newest 20 entries: the previous result is
    still found among its newest events."""
    async with mcp_client(db_url, workspace, agent="a") as a:
        await call(a, "add_tasks", tasks=[t("x")])
        await done(a, "x", result={"commit": "abc"})
        await call(a, "update_task", task_key="x", action="reopen", reason="again")
        for i in range(25):
            await call(a, "record_progress", summary=f"thinking {i}", task_key="x")
        got = await call(a, "claim_task", task_key="x")
        assert got["task"]["context"]["previous_result"] == {"commit": "abc"}
