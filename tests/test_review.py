"""Review gates and the operator role through the official MCP client, on SQLite and PostgreSQL: the whole
review cycle, gates, a reject's comment reaching the next claimer, the operator's release, retry_now and
cancel, and a gate opening exactly once when its last two dependencies complete in two processes at once."""

from __future__ import annotations

from contextlib import asynccontextmanager
from typing import Any

import anyio
import pytest
from mcp import Client, StdioServerParameters
from support import call, fail, run_cli, serve_command, settings_for, subprocess_env

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.mcp.server import create_server
from mcp_harness.service import Harness, Identity

pytestmark = pytest.mark.anyio


@asynccontextmanager
async def connect(url: str, workspace: str, agent: str, role: str = "agent"):
    server = create_server(settings_for(url, backoff_base_seconds=30.0), Identity(workspace, agent, role))
    async with Client(server, raise_exceptions=False) as client:
        yield client


def t(key: str, **kw) -> dict:
    return {"key": key, "title": kw.pop("title", f"task {key}"), **kw}


async def complete(client, key: str, token: str) -> dict:
    return await call(client, "update_task", task_key=key, action="complete", lease_token=token, verification="ran it")


async def rows(client) -> dict[str, dict]:
    return {r["key"]: r for r in (await call(client, "list_tasks"))["tasks"]}


async def test_the_whole_review_cycle(db_url, workspace):
    async with (
        connect(db_url, workspace, "coder") as agent,
        connect(db_url, workspace, "ann", "operator") as ann,
    ):
        plan = [
            t("design", review=True),
            t("signoff", kind="gate", depends_on=["design"]),
            t("build", depends_on=["signoff"]),
        ]
        assert (await call(agent, "add_tasks", tasks=plan))["created"] == ["design", "signoff", "build"]
        listed = await rows(agent)
        # rows leave out review false and kind work (revision 3)
        assert [(r.get("review", False), r.get("kind", "work"), r["ready"]) for r in listed.values()] == [
            (True, "work", True),
            (False, "gate", False),
            (False, "work", False),
        ]
        err = await fail(agent, "add_tasks", tasks=[t("design")])  # review is part of the content
        assert err.code == "task_conflict"

        got = await call(agent, "claim_task")
        assert got["task"]["key"] == "design" and got["task"]["review"] is True
        done = await complete(agent, "design", got["lease"]["token"])
        assert done == {"key": "design", "status": "in_review", "last_error": None, "unblocked": []}
        assert (await call(agent, "list_tasks", task_key="design"))["tasks"][0]["verification"] == "ran it"
        assert await complete(agent, "design", got["lease"]["token"]) == done  # a retry changes nothing
        nothing = await call(agent, "claim_task")
        assert nothing["task"] is None and nothing["reason"] == "waiting_on_review"
        waits = [{"key": "design", "status": "in_review", "owner": "coder", "retry_after": None}]
        assert nothing["waiting_on"] == waits
        assert nothing["retry_after"] is None
        brief = await call(agent, "restore_state")
        assert [(m["key"], m["status"], m.get("lease")) for m in brief["my_tasks"]] == [("design", "in_review", None)]
        assert brief["task_counts"]["in_review"] == 1
        # nothing to do on a task in review, with or without the lease that submitted it
        # (a complete by the lease that submitted it is a retry, a no-op: checked above)
        for action, sent in (
            ("heartbeat", {}),
            ("heartbeat", {"lease_token": got["lease"]["token"]}),
            ("complete", {}),
            ("complete", {"lease_token": "not-the-token"}),
        ):
            err = await fail(agent, "update_task", task_key="design", action=action, verification="v", **sent)
            assert err.text == (
                f"[invalid_argument] task design is in review: a person approves or rejects it; nothing to {action}"
            ), err.text

        # only a person decides, and says what to change when rejecting
        for action in ("approve", "reject"):
            err = await fail(agent, "update_task", task_key="design", action=action, comment="self-approved")
            assert err.code == "forbidden" and "a person's decision" in err.text and "'agent'" in err.text, err.text
            assert "waiting_on_review" in err.text and "to='operators'" in err.text, err.text
            assert not any(how in err.text for how in ("token", "serve", "--role", "CLI")), err.text
        err = await fail(ann, "update_task", task_key="design", action="reject")
        assert err.code == "invalid_argument" and "comment" in err.text
        rejected = await call(ann, "update_task", task_key="design", action="reject", comment="add the error states")
        assert rejected == {"key": "design", "status": "pending", "attempts": 0, "result": None, "verification": None}
        full = (await call(agent, "list_tasks", task_key="design"))["tasks"][0]
        assert full["review_comment"] == "add the error states"

        again = await call(agent, "claim_task")
        assert again["task"]["key"] == "design" and again["lease"]["attempt"] == 1  # the attempt was given back
        assert again["task"]["review_comment"] == "add the error states"  # the comment reaches the next claimer
        await complete(agent, "design", again["lease"]["token"])
        approved = await call(ann, "update_task", task_key="design", action="approve", comment="good")
        assert approved["status"] == "done" and approved["unblocked"] == []  # a gate is never claimable
        assert (await rows(agent))["signoff"]["status"] == "in_review"  # it entered review by itself

        waiting = await call(agent, "claim_task")
        assert waiting["reason"] == "waiting_on_review" and [w["key"] for w in waiting["waiting_on"]] == ["signoff"]
        err = await fail(agent, "claim_task", task_key="signoff")
        assert err.code == "invalid_argument" and "gate" in err.text
        err = await fail(ann, "update_task", task_key="build", action="approve")
        assert err.code == "invalid_argument" and "is pending" in err.text, err.text
        opened = await call(ann, "update_task", task_key="signoff", action="approve")
        assert opened["status"] == "done" and opened["unblocked"] == ["build"]
        assert (await call(agent, "claim_task"))["task"]["key"] == "build"

        log = (await call(agent, "restore_state", progress_limit=10))["recent_progress"]
        said = [(e["agent"], e["task_key"], e["summary"]) for e in log]
        assert (
            "harness",
            "design",
            "ann rejected task design: add the error states; it is pending again for its next claimer",
        ) in said
        assert ("harness", "design", "ann approved task design: good") in said
        assert ("harness", "signoff", "ann approved task signoff") in said


async def test_a_rejected_gate_fails_and_reopen_returns_it_to_review(db_url, workspace):
    async with (
        connect(db_url, workspace, "coder") as agent,
        connect(db_url, workspace, "ann", "operator") as ann,
    ):
        await call(agent, "add_tasks", tasks=[t("go", kind="gate"), t("ship", depends_on=["go"])])
        assert (await rows(agent))["go"]["status"] == "in_review"  # nothing to wait for: a person decides now
        failed = await call(ann, "update_task", task_key="go", action="reject", comment="not this quarter")
        assert failed["status"] == "failed"
        blocked = await call(agent, "claim_task")
        assert blocked["reason"] == "blocked_by_failure" and [w["key"] for w in blocked["waiting_on"]] == ["go"]
        assert (await rows(agent))["ship"]["status"] == "blocked"
        reopened = await call(agent, "update_task", task_key="go", action="reopen", reason="the quarter changed")
        assert reopened["status"] == "in_review"
        assert (await call(agent, "claim_task"))["reason"] == "waiting_on_review"
        err = await fail(agent, "update_task", task_key="go", action="cancel", reason="skip it")
        assert err.code == "forbidden" and "a person decides" in err.text and "serve" not in err.text, err.text
        cancelled = await call(ann, "update_task", task_key="go", action="cancel", reason="decided elsewhere")
        assert cancelled["status"] == "cancelled" and cancelled["unblocked"] == ["ship"]
        assert (await call(agent, "claim_task"))["task"]["key"] == "ship"
        counts = (await call(agent, "list_tasks"))["counts"]
        assert counts["cancelled"] == 1 and counts["claimed"] == 1


async def test_operator_release_retry_now_and_cancel(db_url, workspace):
    async with (
        connect(db_url, workspace, "coder") as agent,
        connect(db_url, workspace, "ann", "operator") as ann,
    ):
        await call(agent, "add_tasks", tasks=[t("a"), t("b", depends_on=["a"]), t("c", depends_on=["a"])])
        got = await call(agent, "claim_task")
        err = await fail(agent, "update_task", task_key="a", action="release")
        assert err.code == "invalid_argument" and "lease_token" in err.text and "a person releases" in err.text
        err = await fail(ann, "update_task", task_key="a", action="release")  # a person says why
        assert err.code == "invalid_argument" and "reason" in err.text, err.text
        released = await call(ann, "update_task", task_key="a", action="release", reason="stuck for an hour")
        assert released["status"] == "pending" and released["attempts"] == 0
        err = await fail(agent, "update_task", task_key="a", action="heartbeat", lease_token=got["lease"]["token"])
        # with the person's reason, as a cancel says it (fresh-eyes trial, revision 3 handoff, item 4)
        assert err.code == "lease_lost" and "an operator ('ann') released it (stuck for an hour)" in err.text, err.text

        got = await call(agent, "claim_task")
        await call(agent, "update_task", task_key="a", action="fail", lease_token=got["lease"]["token"], error="flaky")
        assert (await call(agent, "claim_task"))["reason"] == "backoff"
        err = await fail(agent, "update_task", task_key="a", action="retry_now")
        assert err.code == "forbidden" and "retry_after" in err.text and "token" not in err.text, err.text
        await call(ann, "update_task", task_key="a", action="retry_now")
        got = await call(agent, "claim_task")
        assert got["task"]["key"] == "a" and got["lease"]["attempt"] == 2
        err = await fail(ann, "update_task", task_key="b", action="retry_now")
        assert err.code == "invalid_argument" and "not waiting out a backoff" in err.text

        err = await fail(ann, "update_task", task_key="a", action="cancel")
        assert err.code == "invalid_argument" and "reason" in err.text
        cancelled = await call(ann, "update_task", task_key="a", action="cancel", reason="replaced by a2")
        assert cancelled["status"] == "cancelled" and sorted(cancelled["unblocked"]) == ["b", "c"]
        err = await fail(
            agent, "update_task", task_key="a", action="complete", lease_token=got["lease"]["token"], verification="x"
        )
        assert err.code == "lease_lost" and "cancelled by 'ann' (replaced by a2)" in err.text, err.text
        err = await fail(ann, "update_task", task_key="a", action="cancel", reason="twice")
        assert err.code == "invalid_argument" and "is cancelled" in err.text
        b = await call(agent, "claim_task")
        assert b["task"]["key"] == "b"
        # a person cancelled it: an agent asks a person instead of reviving it
        err = await fail(agent, "update_task", task_key="a", action="reopen", reason="a2 did not work out")
        assert err.code == "forbidden" and "message(action='send', to='operators'" in err.text, err.text
        await call(ann, "update_task", task_key="a", action="reopen", reason="a2 did not work out")
        listed = await rows(agent)
        assert listed["a"]["status"] == "pending" and listed["b"]["status"] == "pending"  # b's lease was revoked
        log = (await call(agent, "restore_state", progress_limit=20))["recent_progress"]
        summaries = [e["summary"] for e in log if e["agent"] == "harness"]
        assert "operator ann released task a (held by coder): stuck for an hour; it is pending again" in summaries
        assert "ann cancelled task a: replaced by a2" in summaries


@pytest.mark.slow
async def test_a_gate_opens_exactly_once_when_its_last_two_dependencies_complete_together(db_url, workspace):
    rounds = 8
    plan = []
    for i in range(rounds):
        plan += [t(f"a{i}"), t(f"b{i}"), t(f"g{i}", kind="gate", depends_on=[f"a{i}", f"b{i}"])]

    def process(agent: str) -> Client:
        cmd = serve_command(db_url, workspace, agent)
        params = StdioServerParameters(command=cmd[0], args=cmd[1:], env=subprocess_env())
        return Client(params, read_timeout_seconds=60)

    async with process("p") as p, process("q") as q:
        await call(p, "add_tasks", tasks=plan)
        for i in range(rounds):
            held = {}
            for client, key in ((p, f"a{i}"), (q, f"b{i}")):
                held[key] = (client, (await call(client, "claim_task", task_key=key))["lease"]["token"])
            async with anyio.create_task_group() as tg:  # both completions at once, one in each process
                for key, (client, token) in held.items():
                    tg.start_soon(complete, client, key, token)
        listed = await rows(p)
    assert all(listed[f"g{i}"]["status"] == "in_review" for i in range(rounds)), listed
    async with Harness.open(settings_for(db_url)) as h:
        for i in range(rounds):
            story = await h.tasks.story(Identity(workspace, "auditor"), f"g{i}")
            assert [e.kind for e in story.events] == ["submit"], (i, story.events)


@pytest.mark.slow
def test_review_cli(tmp_path, workspace):
    db = str(tmp_path / "h.db")

    async def prepare() -> None:
        async with Harness.open(settings_for(db)) as h:
            coder = Identity(workspace, "coder")
            plan = [
                t("design", review=True),
                t("old"),
                t("signoff", kind="gate", depends_on=["design"]),
                t("held"),
                t("release", depends_on=["signoff"]),
            ]
            await h.tasks.add(coder, AddTasksArgs(tasks=plan))
            await h.tasks.claim(coder, ClaimTaskArgs(task_key="held"))
            for verification in ("first try", "read it"):
                got = await h.tasks.claim(coder, ClaimTaskArgs(task_key="design"))
                await h.tasks.update(
                    coder,
                    UpdateTaskArgs(
                        task_key="design", action="complete", lease_token=got.lease.token, verification=verification
                    ),
                )
                if verification == "first try":
                    await h.tasks.update(
                        Identity(workspace, "bob", role="operator"),
                        UpdateTaskArgs(task_key="design", action="reject", comment="name the sizes"),
                    )

    anyio.run(prepare)
    base = ("--db", db, "--workspace", workspace)
    listed = run_cli("review", "list", *base)
    assert listed.returncode == 0 and "design" in listed.stdout and "read it" in listed.stdout
    assert "REJECTED BEFORE" in listed.stdout and "name the sizes" in listed.stdout  # what the reviewer asked
    refused = run_cli("review", "reject", "design", *base)
    assert refused.returncode == 2 and len(refused.stderr.strip().splitlines()) == 1 and "--comment" in refused.stderr
    assert "in_review" in run_cli("tasks", "--status", "in_review", *base).stdout  # nothing changed
    out = run_cli("review", "approve", "design", "--comment", "fine", "--agent", "ann", *base)
    assert out.returncode == 0 and "approved task design" in out.stdout, out.stderr
    assert "ann approved task design: fine" in run_cli("log", *base).stdout
    refused = run_cli("tasks", "cancel", "old", *base)
    assert refused.returncode == 2 and "--reason" in refused.stderr
    out = run_cli("tasks", "cancel", "old", "--reason", "not needed", *base)
    assert out.returncode == 0 and "cancelled" in out.stdout
    out = run_cli("tasks", "retry", "old", *base)
    assert out.returncode == 2 and "not waiting out a backoff" in out.stderr
    shown = run_cli("tasks", "show", "design", *base)
    assert "approve by ann" in shown.stdout and "review: a person approves it" in shown.stdout
    gate = run_cli("tasks", "show", "signoff", *base)  # it entered review when design was done: nobody submitted it
    assert "entered review by itself (its dependencies were done: the last, design, by ann)" in gate.stdout
    assert "submit by" not in gate.stdout
    assert "approve KEY" not in listed.stdout  # the hint is for a terminal (stderr), never in piped output
    refused = run_cli("tasks", "reopen", "old", *base)
    assert refused.returncode == 2 and "--reason" in refused.stderr
    refused = run_cli("tasks", "release", "held", *base)  # a person's release says why
    assert refused.returncode == 2 and "--reason" in refused.stderr and len(refused.stderr.strip().splitlines()) == 1
    out = run_cli("tasks", "release", "held", "--reason", "coder is away this week", "--agent", "ann", *base)
    assert out.returncode == 0 and "released" in out.stdout, out.stderr
    assert "operator ann released task held (held by coder): coder is away this week" in run_cli("log", *base).stdout
    out = run_cli("tasks", "reopen", "old", "--reason", "needed after all", "--agent", "ann", *base)
    assert out.returncode == 0 and "reopened task old: it is pending now" in out.stdout, out.stderr
    assert "ann reopened task old: needed after all" in run_cli("log", *base).stdout
    # a person's approval comment reaches what depends on the gate
    said = "ship 1.0 on Thursday; arm64 follows in 1.0.1"
    out = run_cli("review", "approve", "signoff", "--comment", said, "--agent", "ann", *base)
    assert out.returncode == 0 and "now claimable: release" in out.stdout, out.stderr

    async def claim() -> Any:
        async with Harness.open(settings_for(db)) as h:
            return await h.tasks.claim(Identity(workspace, "coder"), ClaimTaskArgs(task_key="release"))

    got = anyio.run(claim)
    # the gate first (a direct dependency, with the person's comment), then what it depended on
    assert [(d.key, d.comment) for d in got.task.context.dependencies] == [("signoff", said), ("design", None)]


@pytest.mark.slow
def test_the_board_shows_a_retry_backoff(tmp_path, workspace):
    db = str(tmp_path / "h.db")

    async def prepare() -> None:
        async with Harness.open(settings_for(db)) as h:
            coder = Identity(workspace, "coder")
            await h.tasks.add(coder, AddTasksArgs(tasks=[t("flaky")]))
            got = await h.tasks.claim(coder, ClaimTaskArgs(task_key="flaky"))
            await h.tasks.update(
                coder, UpdateTaskArgs(task_key="flaky", action="fail", lease_token=got.lease.token, error="boom")
            )

    anyio.run(prepare)
    board = run_cli("tasks", "--db", db, "--workspace", workspace)
    row = next(line for line in board.stdout.splitlines() if line.startswith("flaky"))
    assert "pending" in row and "retry in " in row, board.stdout


async def test_review_outranks_failure_and_yields_to_leases(db_url, workspace):
    """The contract's precedence: backoff, all_claimed, waiting_on_review, blocked_by_failure."""
    async with connect(db_url, workspace, "coder") as agent:
        plan = [t("r", review=True, priority=2), t("f", max_attempts=1, priority=1), t("x", depends_on=["r", "f"])]
        await call(agent, "add_tasks", tasks=plan)
        got = await call(agent, "claim_task")
        await complete(agent, "r", got["lease"]["token"])
        got = await call(agent, "claim_task")
        await call(agent, "update_task", task_key="f", action="fail", lease_token=got["lease"]["token"], error="no")
        nothing = await call(agent, "claim_task")
        assert nothing["reason"] == "waiting_on_review" and [w["key"] for w in nothing["waiting_on"]] == ["r", "f"]
        await call(agent, "add_tasks", tasks=[t("y", depends_on=["f"])])
        assert (await call(agent, "claim_task", task_key="y"))["reason"] == "blocked_by_failure"
        await call(agent, "add_tasks", tasks=[t("z")])
        held = await call(agent, "claim_task")
        assert held["task"]["key"] == "z"
        assert (await call(agent, "claim_task"))["reason"] == "all_claimed"


async def test_review_fields_are_exported_and_old_exports_still_import(db_url, workspace, tmp_path):
    import json

    coder, ann = Identity(workspace, "coder"), Identity(workspace, "ann", "operator")
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(
            coder, AddTasksArgs(tasks=[t("d", review=True), t("g", kind="gate", depends_on=["d"]), t("x")])
        )
        got = await h.tasks.claim(coder, ClaimTaskArgs(task_key="d"))
        await h.tasks.update(
            coder, UpdateTaskArgs(task_key="d", action="complete", lease_token=got.lease.token, verification="v")
        )
        await h.tasks.update(ann, UpdateTaskArgs(task_key="d", action="reject", comment="again"))
        await h.tasks.update(ann, UpdateTaskArgs(task_key="x", action="cancel", reason="dropped"))
        lines = [line async for line in h.maintenance.export(workspace)]
    copy = f"sqlite+aiosqlite:///{tmp_path / 'copy.db'}"
    async with Harness.open(settings_for(copy)) as h:
        await h.maintenance.import_lines(lines)
        tasks, counts = await h.tasks.board(coder)
        shown = {task.key: (task.status, task.review, task.kind, task.review_comment) for task in tasks}
        assert shown == {
            "d": ("pending", True, "work", "again"),
            "g": ("pending", False, "gate", None),
            "x": ("cancelled", False, "work", None),
        }
        assert (await h.tasks.claim(coder, ClaimTaskArgs(task_key="d"))).task.review_comment == "again"
        assert counts.cancelled == 1

    # an export made before migration 5: task records without the three fields, and no new statuses
    old = []
    for line in lines:
        record = json.loads(line)
        if record.get("type") == "task":
            for column in ("review", "kind", "review_comment"):
                record.pop(column)
            record["status"] = "pending" if record["status"] == "cancelled" else record["status"]
        if record.get("type") != "task_event":
            old.append(json.dumps(record))
    older = f"sqlite+aiosqlite:///{tmp_path / 'older.db'}"
    async with Harness.open(settings_for(older)) as h:
        await h.maintenance.import_lines(old)
        tasks, _counts = await h.tasks.board(coder)
        assert {task.key: (task.review, task.kind) for task in tasks} == {
            "d": (False, "work"),
            "g": (False, "work"),
            "x": (False, "work"),
        }
        assert (await h.tasks.add(coder, AddTasksArgs(tasks=[t("x")]))).unchanged == [
            "x"
        ]  # the old content hash still matches


async def test_reopening_a_dependency_sends_what_waits_in_review_back(db_url, workspace):
    async with (
        connect(db_url, workspace, "coder") as agent,
        connect(db_url, workspace, "ann", "operator") as ann,
    ):
        await call(
            agent,
            "add_tasks",
            tasks=[t("base"), t("doc", review=True, depends_on=["base"]), t("go", kind="gate", depends_on=["base"])],
        )
        got = await call(agent, "claim_task")
        await complete(agent, "base", got["lease"]["token"])
        assert (await rows(agent))["go"]["status"] == "in_review"
        got = await call(agent, "claim_task")
        await complete(agent, "doc", got["lease"]["token"])
        await call(ann, "update_task", task_key="base", action="reopen", reason="the base was wrong")
        listed = await rows(agent)
        assert [listed[k]["status"] for k in ("base", "doc", "go")] == ["pending", "pending", "pending"]
        assert (
            "attempts" not in listed["doc"]
        )  # 0, left out: its attempt is given back: the work is redone for another's fault
        got = await call(agent, "claim_task")
        assert got["task"]["key"] == "base"
        await complete(agent, "base", got["lease"]["token"])
        assert (await rows(agent))["go"]["status"] == "in_review"  # the gate opens again
        assert (await call(agent, "claim_task"))["task"]["key"] == "doc"
