"""Context budgets (issue 16): what an agent pays, in bytes of the text it reads, for the answers it
gets on every session. Run with -s to see the figures."""

from __future__ import annotations

import json
from contextlib import asynccontextmanager

import pytest
from mcp import Client
from support import call, mcp_client, settings_for

from mcp_harness.mcp.server import create_server
from mcp_harness.service import Identity

pytestmark = pytest.mark.anyio

TASK = {
    "key": "auth-login-form",
    "title": "Login form with email and password",
    "description": "A form at /login that signs a user in and shows errors inline.",
    "steps": ["open /login", "sign in with a known user: the dashboard opens", "a wrong password shows an error"],
    "priority": 5,
    "tags": ["web"],
}


async def text_of(client, tool: str, **arguments) -> str:
    result = await client.call_tool(tool, arguments)
    assert not result.is_error, result.content[0].text
    return result.content[0].text


#: restore_state of the project below: 2,438 bytes before revision 3, 2,290 with its leaner answers
#: (timestamps to the second, no `"thread":"main"`, no zero counts) and `you` added, 2,251 once a lease's
#: seconds left are whole (`899`, not `899.935`) and an entry's default `"status":"note"` is left out.
#: Issue 25 aims at 2,000; what is left is no default and no unset field: the project's own words (the
#: state, 529 B with its key; entries' summaries, task keys and commits; the held task's title,
#: description and steps) and what the contract fixes: each entry's `seq`, `created_at` and `agent`
#: (~62 B each) and a status other than note, the lease `{token, attempt, expires_at,
#: expires_in_seconds}` (118 B), the checkpoint's metadata (177 B: "other fields of a result stay as
#: before"), `you`, `found` and `task_counts` (92 B). Then the checkpoint's `behind` (32 B here: the
#: project recorded progress after its checkpoint, which a session must know the log wins over).
RESTORE_LIMIT = 2_295


async def test_a_typical_mid_project_restore_stays_within_its_budget(client):
    """5 progress entries, one held task, about 500 bytes of state."""
    await call(client, "add_tasks", tasks=[{"key": f"t{i}", "title": f"Task {i}"} for i in range(20)] + [TASK])
    state = {
        "goal": "A small web app where users sign in and keep a todo list",
        "stack": {"backend": "FastAPI", "db": "SQLite", "frontend": "htmx"},
        "run": "make dev (port 8000); tests: make test",
        "conventions": ["routes in app/routes/", "one test module per route", "migrations with alembic"],
        "decisions": ["sessions in signed cookies", "passwords hashed with argon2"],
        "phase": "building the auth pages",
        "open_questions": ["email verification now or later?", "rate limit the login route per IP or per user?"],
        "next": "auth, then the todo list pages",
    }
    saved = await call(client, "save_checkpoint", state=state, label="initialized")
    assert 450 <= saved["size_bytes"] <= 550, saved["size_bytes"]
    # five entries as sessions write them: most name their task and commit, some say what comes next
    for i in range(5):
        summary = f"t{i}: implemented it and verified each acceptance step with the test suite"
        await call(
            client,
            "record_progress",
            summary=summary,
            status="done",
            task_key=f"t{i}",
            artifacts={"commit": f"{i:07x}"},
        )
    await call(
        client,
        "record_progress",
        summary="planned the auth pages: login first, then sign-up and reset",
        next_steps=["auth-login-form", "auth-signup"],
    )
    await call(client, "claim_task", task_key="auth-login-form")
    text = await text_of(client, "restore_state")
    print(f"restore_state result: {len(text.encode())} bytes")
    assert '"auth-login-form"' in text and text.count('"seq"') == 5
    assert len(text.encode()) <= RESTORE_LIMIT, text


async def test_a_claim_with_a_short_description_stays_under_600_bytes(client):
    """Revision 3: a claim of a task with a short description and no context (no notes, no dependency)."""
    await call(client, "add_tasks", tasks=[TASK])
    text = await text_of(client, "claim_task")
    print(f"claim_task result (short description, no context): {len(text.encode())} bytes")
    assert '"token"' in text and len(text.encode()) <= 600, text


@asynccontextmanager
async def operator(url: str, workspace: str):
    async with Client(create_server(settings_for(url), Identity(workspace, "ann", "operator"))) as client:
        yield client


async def test_an_action_answer_stays_under_300_bytes(db_url, workspace):
    """Revision 3: actions other than heartbeat answer {key, status} plus what changed."""
    async with mcp_client(db_url, workspace) as agent, operator(db_url, workspace) as ann:
        keys = [f"{TASK['key']}-{i}" for i in range(3)]
        after = {"key": "after", "title": "After", "depends_on": [TASK["key"], *keys]}
        await call(agent, "add_tasks", tasks=[{**TASK, "review": True}, *({**TASK, "key": k} for k in keys), after])
        sizes = {}
        got = await call(agent, "claim_task", task_key=TASK["key"])
        sizes["complete"] = await text_of(
            agent,
            "update_task",
            task_key=TASK["key"],
            action="complete",
            lease_token=got["lease"]["token"],
            verification="ran the suite: 42 passed",
            result={"commit": "bbe720c"},
        )
        sizes["approve"] = await text_of(ann, "update_task", task_key=TASK["key"], action="approve", comment="good")
        got = await call(agent, "claim_task", task_key=keys[0])
        sizes["fail"] = await text_of(
            agent,
            "update_task",
            task_key=keys[0],
            action="fail",
            lease_token=got["lease"]["token"],
            error="the build broke",
        )
        got = await call(agent, "claim_task", task_key=keys[1])
        sizes["release"] = await text_of(
            agent, "update_task", task_key=keys[1], action="release", lease_token=got["lease"]["token"]
        )
        sizes["reopen"] = await text_of(agent, "update_task", task_key=TASK["key"], action="reopen", reason="regressed")
        sizes["cancel"] = await text_of(ann, "update_task", task_key=keys[2], action="cancel", reason="not needed")
        for action, text in sizes.items():
            print(f"update_task {action} answer: {len(text.encode())} bytes")
            assert len(text.encode()) <= 300, text


async def test_a_list_of_50_open_tasks_stays_under_7000_bytes(client):
    """50 open tasks, as a plan has them: titles of a few words, some priorities, dependencies and holders."""
    parts = ("api", "ui", "db")
    plan = [
        {
            "key": f"step-{i:02}-{parts[i % 3]}",
            "title": f"Build part {i} of the {parts[i % 3]} layer",
            "priority": i % 4,
            "depends_on": [f"step-{i - 1:02}-{parts[(i - 1) % 3]}"] if i % 2 else [],
        }
        for i in range(50)
    ]
    await call(client, "add_tasks", tasks=plan)
    for _ in range(5):
        await call(client, "claim_task")
    text = await text_of(client, "list_tasks")
    listed = json.loads(text)
    print(f"list_tasks of 50 open tasks: {len(text.encode())} bytes")
    assert len(listed["tasks"]) == 50 and len(text.encode()) <= 7_000, len(text.encode())


async def test_a_claims_context_stays_within_2000_bytes_however_long_the_history(client):
    """Long results and verifications on many dependencies, hundreds of long notes about the task: the
    claim's `context` is at most 2,000 bytes of compact JSON (UTF-8, `…` counted as 3 bytes)."""
    deps = [{"key": f"dependency-number-{i:02d}", "title": "d"} for i in range(12)]
    await call(client, "add_tasks", tasks=[*deps, {**TASK, "depends_on": [d["key"] for d in deps]}])
    for d in deps:
        got = await call(client, "claim_task", task_key=d["key"])
        await call(
            client,
            "update_task",
            task_key=d["key"],
            action="complete",
            lease_token=got["lease"]["token"],
            result={"notes": "é" * 600, "files": [f"src/{i}.py" for i in range(40)]},
            verification="ü" * 900,
        )
    for i in range(200):
        await call(client, "record_progress", summary=f"attempt note {i}: " + "ö" * 500, task_key=TASK["key"])
    got = await call(client, "claim_task", task_key=TASK["key"])
    context = got["task"]["context"]
    size = len(json.dumps(context, separators=(",", ":"), ensure_ascii=False).encode())
    print(f"claim_task context after a long history: {size} bytes")
    assert size <= 2000, size
    assert context["notes"] and context["notes"][0]["text"].startswith("attempt note 199")
    assert context.get("more_dependencies", 0) + len(context["dependencies"]) == len(deps)
