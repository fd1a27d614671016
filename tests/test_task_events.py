"""Contract revision 2 for tasks, through the official MCP client on SQLite and PostgreSQL: result shapes
(leases once, heartbeat = lease), unblocked/revoked, idempotent complete, cleared fields, task events and
the harness's log entries, precise empty-claim reasons, lease_lost texts, list_tasks filters."""

from __future__ import annotations

import json

import pytest
from support import call, fail, mcp_client

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.service import Harness, Identity
from mcp_harness.tasks.store import tasks as task_store

pytestmark = pytest.mark.anyio


def t(key: str, **kw) -> dict:
    return {"key": key, "title": kw.pop("title", f"task {key}"), **kw}


async def claim(client, **kw) -> dict:
    return await call(client, "claim_task", **kw)


async def update(client, key: str, action: str, **kw) -> dict:
    return await call(client, "update_task", task_key=key, action=action, **kw)


async def complete(client, key: str, token: str, **kw) -> dict:
    return await update(client, key, "complete", lease_token=token, verification=kw.pop("verification", "tested"), **kw)


async def events(db_url: str, workspace: str, key: str) -> list[tuple[str, str, dict]]:
    async with Harness.open(_settings(db_url)) as h, h.db.read() as conn:
        rows = await task_store.events(conn, workspace, key)
    return [(r.kind, r.actor, json.loads(r.detail) if r.detail else {}) for r in rows]


def _settings(db_url: str):
    from support import settings_for

    return settings_for(db_url)


async def harness_log(client, key: str) -> list[str]:
    entries = (await call(client, "restore_state", progress_limit=50))["recent_progress"]
    return [e["summary"] for e in reversed(entries) if e["agent"] == "harness" and e["task_key"] == key]


async def test_claim_result_carries_the_lease_once_and_is_small(client):
    await call(
        client,
        "add_tasks",
        tasks=[t("a", description="Add a /health endpoint returning 200.", steps=["GET /health is 200"])],
    )
    result = await client.call_tool("claim_task", {})
    got = result.structured_content
    assert set(got) == {"task", "lease", "reason", "waiting_on", "retry_after"}
    assert "lease" not in got["task"], "the task inside a claim carries no copy of the lease"
    lease = got["lease"]
    assert set(lease) == {"token", "attempt", "expires_at", "expires_in_seconds"}
    assert lease["attempt"] == 1 and lease["expires_in_seconds"] == 900
    size = len(result.content[0].text.encode())
    assert size < 1500, f"claim result is {size} bytes"
    beat = await update(client, "a", "heartbeat", lease_token=lease["token"], lease_seconds=120)
    assert set(beat) == {"lease"} and beat["lease"]["expires_in_seconds"] == 120
    clock.advance(200)
    brief = await call(client, "restore_state")
    held = brief["my_tasks"][0]["lease"]
    assert held["expired"] is True and -81 <= held["expires_in_seconds"] <= -80  # whole seconds, rounded down


async def test_complete_reports_unblocked_and_is_idempotent_for_its_lease(client):
    await call(
        client, "add_tasks", tasks=[t("base"), t("x", depends_on=["base"]), t("y", depends_on=["base", "z"]), t("z")]
    )
    got = await claim(client, task_key="base")
    failed = await update(client, "base", "fail", lease_token=got["lease"]["token"], error="flaky")
    assert set(failed) == {"key", "status", "available_at"}, "a retry backoff began; nothing to report on dependents"
    clock.advance(10)
    again = await claim(client, task_key="base")
    done = await complete(client, "base", again["lease"]["token"], result={"url": "/health"})
    assert done["unblocked"] == ["x"], "y still waits on z"
    assert done["last_error"] is None, "complete clears last_error"
    repeat = await complete(client, "base", again["lease"]["token"], verification="other words")
    assert repeat == {**done, "unblocked": []}, "a retried complete by the same lease changes nothing"
    stale = await fail(
        client, "update_task", task_key="base", action="complete", lease_token=got["lease"]["token"], verification="x"
    )
    assert stale.code == "lease_lost" and "failed by agent 'agent-a'" in stale.text


async def test_reopen_revokes_dependent_leases_clears_and_logs(client, db_url, workspace):
    await call(client, "add_tasks", tasks=[t("lib"), t("app", depends_on=["lib"])])
    lib = await claim(client)
    await complete(client, "lib", lib["lease"]["token"], result={"version": 1})
    app = await claim(client)
    assert app["task"]["key"] == "app"
    reopened = await update(client, "lib", "reopen", reason="API changed")
    assert reopened["revoked"] == ["app"], "reopen says whose lease it revoked (the caller's own included)"
    # compact (revision 3): what changed, and the fields it cleared as null; a reason is no error
    assert reopened == {
        "key": "lib",
        "status": "pending",
        "attempts": 0,
        "result": None,
        "verification": None,
        "revoked": ["app"],
    }
    err = await fail(client, "update_task", task_key="app", action="heartbeat", lease_token=app["lease"]["token"])
    assert err.code == "lease_lost" and "a dependency was reopened" in err.text and "'lib'" in err.text
    assert err.text.endswith(
        "claim_task(task_key='app') takes it again when it is claimable (or says what it waits on)"
    )
    kinds = await events(db_url, workspace, "lib")
    assert [k for k, _a, _d in kinds] == ["claim", "complete", "reopen"]
    reopen = kinds[-1][2]
    assert reopen["reason"] == "API changed" and reopen["verification"] == "tested"
    assert json.loads(reopen["result"]) == {"version": 1}, "the cleared result stays in the task's events"
    assert [k for k, _a, _d in await events(db_url, workspace, "app")] == ["claim", "revoke"]
    retaken = await claim(client, task_key="lib")
    assert "last_error" not in retaken["task"]  # the next claimer is not shown the reason as an error
    # the note says what the reopen cleared: the next holder reads it in its context
    assert await harness_log(client, "lib") == [
        'agent-a reopened task lib: API changed; it was done with result {"version":1} / verification tested'
    ]
    assert await harness_log(client, "app") == [
        "the lease of agent-a on task app was revoked: its dependency lib was reopened by agent-a"
    ]


async def test_failures_and_take_overs_reach_the_log(db_url, workspace):
    async with mcp_client(db_url, workspace, agent="A") as a, mcp_client(db_url, workspace, agent="B") as b:
        await call(a, "add_tasks", tasks=[t("job", max_attempts=2), t("solo", max_attempts=1)])
        first = await claim(a, task_key="job", lease_seconds=10)
        clock.advance(11)
        second = await claim(b, task_key="job")
        assert second["lease"]["attempt"] == 2
        await update(b, "job", "fail", lease_token=second["lease"]["token"], error="disk full")
        await claim(a, task_key="solo", lease_seconds=10)
        clock.advance(11)
        gone = await claim(b, task_key="solo")
        assert gone["task"] is None and gone["reason"] == "blocked_by_failure"
        assert await harness_log(a, "job") == [
            "B took over task job (attempt 2): the lease of A expired",
            "task job failed on attempt 2 (B): disk full; no attempts left: failed",
        ]
        assert await harness_log(a, "solo") == ["task solo failed: the lease of A expired on its last attempt (1)"]
        err = await fail(a, "update_task", task_key="job", action="heartbeat", lease_token=first["lease"]["token"])
        assert "agent 'B' took the task over (attempt 2)" in err.text
    assert [k for k, _a, _d in await events(db_url, workspace, "job")] == ["claim", "take_over", "fail"]
    assert [(k, actor) for k, actor, _d in await events(db_url, workspace, "solo")] == [("claim", "A"), ("expire", "A")]


async def test_lease_lost_for_a_token_that_never_held_the_task(client):
    await call(client, "add_tasks", tasks=[t("a"), t("b")])
    a = await claim(client, task_key="a")
    err = await fail(
        client, "update_task", task_key="b", action="complete", lease_token=a["lease"]["token"], verification="x"
    )
    assert err.code == "lease_lost" and "never held it" in err.text and "pending" in err.text
    made_up = await fail(client, "update_task", task_key="a", action="heartbeat", lease_token="made-up")
    assert "never held it" in made_up.text and "held by agent 'agent-a' (attempt 1)" in made_up.text


async def test_claim_reasons_and_their_precedence(client):
    assert (await claim(client))["reason"] == "none_pending"
    plan = [
        t("f", max_attempts=1, tags=["x"]),
        t("after-f", depends_on=["f"], tags=["x"]),
        t("held", tags=["y"]),
        t("after-held", depends_on=["held"], tags=["y"]),
        t("slow", tags=["z"]),
    ]
    await call(client, "add_tasks", tasks=plan)
    assert (await claim(client, tags=["nothing-has-this"]))["reason"] == "none_pending"
    f = await claim(client, task_key="f")
    await update(client, "f", "fail", lease_token=f["lease"]["token"], error="boom")
    held = await claim(client, task_key="held", lease_seconds=100)
    slow = await claim(client, task_key="slow")
    await update(client, "slow", "fail", lease_token=slow["lease"]["token"], error="later")
    only_x = await claim(client, tags=["x"])
    assert only_x["reason"] == "blocked_by_failure" and [w["key"] for w in only_x["waiting_on"]] == ["f"]
    only_y = await claim(client, tags=["y"])
    assert only_y["reason"] == "all_claimed" and 99 < only_y["retry_after"] <= 100
    assert only_y["waiting_on"] == [
        {
            "key": "held",
            "status": "claimed",
            "owner": "agent-a",
            "retry_after": only_y["retry_after"],
            "mine": True,
            "silent_seconds": only_y["waiting_on"][0]["silent_seconds"],
            "alive": None,
        }  # in-process: unknown
    ]
    assert isinstance(only_y["waiting_on"][0]["silent_seconds"], int) and only_y["waiting_on"][0]["silent_seconds"] >= 0
    everything = await claim(client)
    assert everything["reason"] == "backoff" and 0 < everything["retry_after"] <= 5
    # the winning wait's roots first, then every other wait's: the held task, the failed one
    assert [w["key"] for w in everything["waiting_on"]] == ["slow", "held", "f"]
    assert (await claim(client, tags=["x", "y"]))["reason"] == "all_claimed"
    # one named task: its own reason
    assert (await claim(client, task_key="after-f"))["reason"] == "blocked_by_failure"
    assert (await claim(client, task_key="held"))["reason"] == "all_claimed"
    await complete(client, "held", held["lease"]["token"])
    assert (await claim(client, task_key="held"))["reason"] == "all_done"
    assert (await claim(client, task_key="after-held"))["task"]["key"] == "after-held"
    assert (await claim(client, tags=["y"]))["reason"] == "all_claimed"


async def test_list_tasks_status_string_or_list_and_ready(client):
    await call(client, "add_tasks", tasks=[t("a"), t("b", depends_on=["a"]), t("c")])
    got = await claim(client, task_key="c")
    rows = (await call(client, "list_tasks"))["tasks"]
    assert {r["key"]: (r["status"], r["ready"]) for r in rows} == {
        "a": ("pending", True),
        "b": ("pending", False),
        "c": ("claimed", False),
    }
    assert [r["key"] for r in (await call(client, "list_tasks", status="pending"))["tasks"]] == ["a", "b"]
    assert [r["key"] for r in (await call(client, "list_tasks", status=["claimed", "pending"]))["tasks"]] == [
        "a",
        "b",
        "c",
    ]
    assert [r["key"] for r in (await call(client, "list_tasks", ready=True))["tasks"]] == ["a"]
    assert [r["key"] for r in (await call(client, "list_tasks", ready=False, status="pending"))["tasks"]] == ["b"]
    clock.advance(1000)  # c's lease ran out: claimable again
    assert [r["key"] for r in (await call(client, "list_tasks", ready=True))["tasks"]] == ["a", "c"]
    err = await fail(client, "list_tasks", status="nonsense")
    assert err.code == "invalid_argument"
    assert got["lease"]["attempt"] == 1


async def test_events_are_exported_and_imported(db_url, workspace, tmp_path):
    ident = Identity(workspace=workspace, agent="a")
    async with Harness.open(_settings(db_url)) as h:
        from mcp_harness.models import TaskSpec

        await h.tasks.add(ident, AddTasksArgs(tasks=[TaskSpec(key="k", title="k")]))
        got = await h.tasks.claim(ident, ClaimTaskArgs())
        await h.tasks.update(
            ident, UpdateTaskArgs(task_key="k", action="fail", lease_token=got.lease.token, error="e", retry=False)
        )
        lines = [line async for line in h.maintenance.export(workspace)]
    exported = [json.loads(line) for line in lines if '"type":"task_event"' in line]
    assert [(e["kind"], e["actor"]) for e in exported] == [("claim", "a"), ("fail", "a")]
    assert "id" not in exported[0] and got.lease.token not in "".join(lines), "events keep no usable token"
    target = f"sqlite+aiosqlite:///{tmp_path / 'copy.db'}"
    async with Harness.open(_settings(target)) as h:
        counts = await h.maintenance.import_lines(lines)
        assert counts["task_event"] == 2
    assert [k for k, _a, _d in await events(target, workspace, "k")] == ["claim", "fail"]


@pytest.mark.slow
async def test_cli_tasks_show_tells_one_tasks_story(tmp_path):
    from support import run_cli

    db = tmp_path / "story.db"
    url = f"sqlite+aiosqlite:///{db}"
    async with mcp_client(url, "ws", agent="A") as a:
        await call(a, "add_tasks", tasks=[t("api", max_attempts=3)])
        got = await claim(a)
        await update(a, "api", "fail", lease_token=got["lease"]["token"], error="port in use")
        clock.advance(10)
        again = await claim(a)
        await complete(a, "api", again["lease"]["token"], verification="curl /health is 200")
        await call(a, "record_progress", summary="api is up", task_key="api", status="done")
    out = run_cli("tasks", "show", "api", "--db", str(db), "--workspace", "ws")
    assert out.returncode == 0, out.stderr
    text = out.stdout
    assert "api: task api" in text and "status done" in text and "curl /health is 200" in text
    assert "fail by A (attempt 1)" in text and "port in use" in text and "complete by A (attempt 2)" in text
    assert "harness NOTE: task api failed on attempt 1 (A): port in use; will be retried in 5s" in text
    assert '{"error": "port in use", "retry_in": "5s"}' in text  # the event's delay, with its unit
    assert "A DONE: api is up" in text
    story = json.loads(run_cli("tasks", "show", "api", "--json", "--db", str(db), "--workspace", "ws").stdout)
    assert [e["kind"] for e in story["events"]] == ["claim", "fail", "claim", "complete"]
    assert [p["agent"] for p in story["progress"]] == ["harness", "A"]
    missing = run_cli("tasks", "show", "nope", "--db", str(db), "--workspace", "ws")
    assert missing.returncode != 0 and "nope" in missing.stderr and "Traceback" not in missing.stderr
    log = run_cli("log", "--db", str(db), "--workspace", "ws", "--task", "api")
    # the log is a table (agent, status, task columns): the harness's row about api carries the error
    rows = [line.split() for line in log.stdout.splitlines() if "port in use" in line]
    assert len(rows) == 1 and rows[0][3:6] == ["harness", "NOTE", "api"], log.stdout
