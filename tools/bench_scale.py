"""Hot paths at scale: the same calls on a big workspace and a small one, in-process, side by side.

Builds two databases per backend: a big workspace (100,000 tasks, 1,000,000 progress entries, 10,000
checkpoints, 164,000 task events of which 40,000 belong to one task) and a small one (1,000 tasks, 10,000
entries, 100 checkpoints, 1,660 task events of which 400 belong to that task), rows written in bulk
through the store's connection (not tool calls; the task counters' triggers run as they would).
Then times, taking turns between the two so the drift of a shared machine falls on both alike:
claim, restore_state, a list_tasks page, the console board's first page and a timeline page (the
newest, and one thread's), a full-text search (restore_state and list_tasks with `query`: a word 100
entries and tasks hold at either size), the inbox (100,000 messages against 1,000: a read, and the
unread count claim and heartbeat answers carry), and the console's pages as a person gets them (issue
29: board, its live refresh, the task page of the task with the most events, graph, timeline: a GET
through the console's real app, the template rendered). Prints p50s and the ratio big / small; exits 1
if any ratio is over 2x (rows marked "(info)" are shown, not gated). With --wake it also runs
tools/bench_wake.py per backend and prints its wake-up latencies. With --paths it also times a claim of
a task with paths in a workspace where 1,000 other leases hold live path reservations against one
where none are held (issue 28: within 1.5x; gated like the rest). tools/bench_tabs.py measures an
agent's calls while browser tabs hold a big board open.

    python tools/bench_scale.py                                   # SQLite, full size
    python tools/bench_scale.py --quick                           # 10,000 tasks / 100,000 entries
    python tools/bench_scale.py --only page,board,timeline        # the console's rows only
    python tools/bench_scale.py --quick --paths                   # and the claim cost of 1,000 reservations
    python tools/bench_scale.py --postgres postgresql+asyncpg://postgres@127.0.0.1:5432/bench --wake
    (MCP_HARNESS_TEST_POSTGRES_URL also selects PostgreSQL, after SQLite.)
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import secrets
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx2
from starlette.applications import Starlette

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_harness.arguments import (
    AddTasksArgs,
    ClaimTaskArgs,
    ListTasksArgs,
    RestoreStateArgs,
    SaveCheckpointArgs,
    UpdateTaskArgs,
)
from mcp_harness.config import Settings  # noqa: E402
from mcp_harness.console.auth import TokenLogin  # noqa: E402
from mcp_harness.console.routes import console_routes  # noqa: E402
from mcp_harness.service import Harness, Identity  # noqa: E402
from mcp_harness.store.connection import Query  # noqa: E402
from mcp_harness.tasks.store.tasks import Q as TASK_QUERIES  # noqa: E402

WORKSPACE = "scale"
AGENTS = 20
THREADS = 100
LIMIT_RATIO = 2.0
MESSAGES = {"big": 100_000, "small": 1_000}
#: the tools' insert, with the columns a claim or a completion sets (rows are written as they end up)
_INSERT_TASK = Query(
    TASK_QUERIES.insert_task.sqlite.replace("RETURNING id", "")
    .replace(
        "attempts, available_at",
        "attempts, available_at, completed_at, owner, lease_token, lease_expires_at, lease_seconds",
    )
    .replace(
        ":blocked, 0, :available_at",
        ":blocked, :attempts, :available_at, :completed_at, :owner, :lease_token, :lease_expires_at, :lease_seconds",
    ),
    name="bench_insert_task",
)
_INSERT_PROGRESS = Query(
    "INSERT INTO progress (entry_id, workspace, seq, thread, agent, status, summary, details, next_steps, task_key, "
    "artifacts, created_at) VALUES (:entry_id, :workspace, :seq, :thread, :agent, :status, :summary, NULL, NULL, "
    ":task_key, NULL, :created_at)",
    name="bench_insert_progress",
)
_ENSURE_WORKSPACE = Query(
    "INSERT INTO workspaces (name, progress_seq, created_at) VALUES (:ws, 0, :at) ON CONFLICT DO NOTHING"
)
_INSERT_MESSAGE = Query(
    "INSERT INTO messages (message_id, workspace, sender, recipient, subject, body, task_key, reply_to, created_at, "
    "acked_at, acked_by) VALUES (:message_id, :workspace, :sender, :recipient, NULL, :body, NULL, NULL, :created_at, "
    ":acked_at, :acked_by)",
    name="bench_insert_message",
)
#: how many progress entries and tasks hold the searched word, at either size
NEEDLES = 100
_SET_SEQ = Query("UPDATE workspaces SET progress_seq = :seq WHERE name = :ws")
#: the task whose page the console rows open: pending and ready (off 70 of its hundred), with
#: `HOT_EVENTS_PER_TASK` events per task of the workspace (40,000 at 100,000 tasks, 400 at 1,000)
HOT_TASK = "t000070"
HOT_EVENTS_PER_TASK = 0.4
_VACUUM = Query("VACUUM ANALYZE")


def _task_row(i: int, at: float) -> tuple[dict[str, Any], str | None]:
    """Task i of a workspace shaped like a long-running team's: per 100 tasks, 60 done, 2 failed, 38
    pending of which 4 are blocked behind a failure; 20 tasks held under leases that do not run out during
    the run (one per agent, as a team holds them)."""
    off, block = i % 100, i - i % 100
    row = {
        "workspace": WORKSPACE,
        "added_by": None,
        "key": f"t{i:06d}",
        "title": f"task {i}: do the thing number {i}",
        "description": None,
        "steps": "[]",
        "priority": i % 4,
        "depends_on": "[]",
        "tags": "[]",
        "max_attempts": 3,
        "dependents": 0,
        "content_hash": f"h{i}",
        "status": "pending",
        "ready": True,
        "blocked": False,
        "available_at": 0.0,
        "created_at": at + i * 0.01,
        "updated_at": at + i * 0.01,
        "completed_at": None,
        "owner": None,
        "lease_token": None,
        "lease_expires_at": None,
        "lease_seconds": None,
        "attempts": 0,
        "review": False,
        "kind": "work",
        "paths": None,
    }
    dep = None
    if off < 60:
        row.update(status="done", ready=False, completed_at=row["updated_at"], owner="agent-0", attempts=1)
    elif off == 60:
        row.update(status="failed", ready=False, dependents=4)
    elif off == 61:
        row.update(status="failed", ready=False)
    elif off in (62, 64) and i < 1000:
        until = time.time() + 86400
        row.update(
            status="claimed",
            owner=f"agent-{i % AGENTS}",
            lease_token=f"bench-{i}",
            lease_expires_at=until,
            lease_seconds=3600,
            attempts=1,
        )
    elif off % 10 == 3:
        dep = f"t{block + 60:06d}"
        row.update(blocked=True, ready=False, depends_on=json.dumps([dep]))
    return row, dep


def _event_rows(tasks: int, entries: int, at: float) -> list[dict[str, Any]]:
    """The task events of the workspace, in time order (ids follow time, as they do when tools write
    them): a claim and a completion per done task, a claim and a failure per failed one, a claim per held
    one, spread over the progress entries' span so they interleave with them on the timeline; and the
    hot task's claims and hand-backs, one per 25 entries (an agent that keeps taking it up and letting go)."""
    span = entries * 0.05
    rows: list[dict[str, Any]] = []

    def add(t: float, i: int, kind: str, actor: str, attempt: int, detail: dict[str, Any]) -> None:
        rows.append(
            {
                "ws": WORKSPACE,
                "key": f"t{i:06d}",
                "ev_kind": kind,
                "ev_actor": actor,
                "ev_attempt": attempt,
                "ev_detail": json.dumps(detail),
                "ev_at": t,
            }
        )

    ends = {"done": ("complete", {"verification": "tests pass"}), "failed": ("fail", {"error": "the build broke"})}
    for i in range(tasks):
        row, _ = _task_row(i, at)
        t = at + span * i / tasks
        if row["status"] in ("done", "failed", "claimed"):
            owner = row["owner"] or f"agent-{i % AGENTS}"
            add(t - 30, i, "claim", owner, 1, {"lease_seconds": 900})
            if row["status"] in ends:
                kind, detail = ends[row["status"]]
                add(t, i, kind, owner, 1, detail)
    hot = round(tasks * HOT_EVENTS_PER_TASK)
    for k in range(hot):
        kind, detail = ("claim", {"lease_seconds": 900}) if k % 2 == 0 else ("release", {"reason": "waiting on review"})
        add(at + span * k / hot, int(HOT_TASK[1:]), kind, f"agent-{k // 2 % AGENTS}", k // 2 + 1, detail)
    rows.sort(key=lambda r: r["ev_at"])
    return rows


async def build(
    h: Harness, tasks: int, entries: int, checkpoints: int, say: Callable[[str], None], messages: int = 0
) -> None:
    at = time.time() - 86400
    db = h.db
    started = time.perf_counter()
    for start in range(0, tasks, 5000):
        rows, edges = [], []
        for i in range(start, min(tasks, start + 5000)):
            row, dep = _task_row(i, at)
            if i % (tasks // NEEDLES) == 0:
                row["title"] += " (needle)"
            rows.append(row)
            if dep:
                edges.append({"ws": WORKSPACE, "task_key": row["key"], "dep_key": dep})
        async with db.write() as conn:
            await conn.execute_many(_INSERT_TASK, rows)
            if edges:
                await conn.execute_many(TASK_QUERIES.insert_dependency, edges)
    async with db.write() as conn:
        await conn.execute(_ENSURE_WORKSPACE, {"ws": WORKSPACE, "at": at})
    say(f"  {tasks:,} tasks in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    statuses = ("note", "in_progress", "done", "blocked")
    for start in range(0, entries, 10000):
        rows = [
            {
                "entry_id": f"e{secrets.token_hex(8)}-{i}",
                "workspace": WORKSPACE,
                "seq": i + 1,
                "thread": "main" if i % 10 == 0 else f"thread-{i % THREADS}",
                "agent": f"agent-{i % AGENTS}",
                "status": statuses[i % 4],
                "summary": f"entry {i}: worked on the task and noted what happened"
                + (" needle" if i % (entries // NEEDLES) == 0 else ""),
                "task_key": f"t{i % tasks:06d}" if i % 3 == 0 else None,
                "created_at": at + i * 0.05,
            }
            for i in range(start, min(entries, start + 10000))
        ]
        async with db.write() as conn:
            await conn.execute_many(_INSERT_PROGRESS, rows)
    async with db.write() as conn:
        await conn.execute(_SET_SEQ, {"ws": WORKSPACE, "seq": entries})
    say(f"  {entries:,} progress entries in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    events = _event_rows(tasks, entries, at)
    for start in range(0, len(events), 10000):
        async with db.write() as conn:
            await conn.execute_many(TASK_QUERIES.insert_task_event, events[start : start + 10000])
    say(
        f"  {len(events):,} task events ({round(tasks * HOT_EVENTS_PER_TASK):,} of them {HOT_TASK}'s) in "
        f"{time.perf_counter() - started:.1f} s"
    )
    started = time.perf_counter()
    for j in range(checkpoints):
        who = Identity(WORKSPACE, f"agent-{j % AGENTS}")
        thread = "main" if j % 10 == 0 else f"thread-{j % THREADS}"
        await h.checkpoints.save(
            who, SaveCheckpointArgs(thread=thread, state={"step": j, "goal": "ship", "notes": ["a", "b"]})
        )
    say(f"  {checkpoints:,} checkpoints in {time.perf_counter() - started:.1f} s")
    started = time.perf_counter()
    for start in range(0, messages, 10000):  # to the agents (9 in 10 acknowledged), to everyone, to bench
        rows = []
        for i in range(start, min(messages, start + 10000)):
            to = "*" if i % 50 == 0 else "bench" if i % (messages // 3) == 1 else f"agent-{i % AGENTS}"
            acked = i % 10 != 0 and to != "*" and to != "bench"  # bench: 3 unread at either size
            recent = i % (messages // 5) == 0  # 5 messages to everyone are recent; the others are old news
            created = at + i * 0.5 if to != "*" or recent else at - 8 * 86400 + i * 0.001
            rows.append(
                {
                    "message_id": f"m{secrets.token_hex(8)}-{i}",
                    "workspace": WORKSPACE,
                    "sender": f"agent-{(i + 1) % AGENTS}",
                    "recipient": to,
                    "body": f"message {i}",
                    "created_at": created,
                    "acked_at": at + i if acked else None,
                    "acked_by": to if acked else None,
                }
            )
        async with db.write() as conn:
            await conn.execute_many(_INSERT_MESSAGE, rows)
    if messages:
        say(f"  {messages:,} messages in {time.perf_counter() - started:.1f} s")
    if not db.is_sqlite:  # autovacuum would, given time (the harness analyzes the task tables itself)
        async with db.single() as conn:
            await conn.execute(_VACUUM)


def _operations(h: Harness) -> dict[str, Callable[[], Awaitable[Any]]]:
    me = Identity(WORKSPACE, "bench")
    return {
        "claim_task": lambda: h.tasks.claim(me, ClaimTaskArgs(lease_seconds=3600)),
        "restore_state": lambda: h.restore(me, RestoreStateArgs()),
        "list_tasks page": lambda: h.tasks.list(me, ListTasksArgs()),
        "board first page": lambda: h.console.board(me),
        # not in the list (not gated): pages whose rows are a share of the tasks
        "(info) list_tasks page, status=failed": lambda: h.tasks.list(me, ListTasksArgs(status="failed")),
        "(info) board, 20 cards a column": lambda: h.console.board(me, per_column=20),
        "timeline page": lambda: h.console.timeline(me),
        "timeline page, one thread": lambda: h.console.timeline(me, thread="thread-7"),
        "search progress (100 matches)": lambda: h.progress.search(me, "needle", limit=5),
        "restore_state, query (100 matches)": lambda: h.restore(me, RestoreStateArgs(query="needle")),
        "list_tasks, query (100 matches)": lambda: h.tasks.list(me, ListTasksArgs(query="needle")),
        "(info) restore_state, query matching every entry": lambda: h.restore(me, RestoreStateArgs(query="worked")),
        "message read (inbox)": lambda: h.messages.read(me),
        "inbox count (claim and heartbeat)": lambda: h.inbox(me),
    }


#: nothing claimable, as a team's backlog usually is: every open task waits on a task someone holds
_WAIT_ON_HELD = [
    Query(
        "INSERT INTO task_deps (workspace, task_key, dep_key) SELECT workspace, \"key\", 't000062' FROM tasks "
        "WHERE workspace = :ws AND status = 'pending' AND ready = TRUE"
    ),
    Query("UPDATE tasks SET ready = FALSE WHERE workspace = :ws AND status = 'pending' AND ready = TRUE"),
]
#: nothing claimable, the costly way: every pending task has its dependencies done but is in a backoff
_ALL_IN_BACKOFF = [
    Query("DELETE FROM task_deps WHERE workspace = :ws AND dep_key = 't000062'"),
    Query(
        "UPDATE tasks SET ready = TRUE, available_at = :later "
        "WHERE workspace = :ws AND status = 'pending' AND NOT blocked"
    ),
]
EMPTY_CLAIMS = {
    "(info) claim_task finding nothing: the backlog waits on held tasks": _WAIT_ON_HELD,
    "(info) claim_task finding nothing: every pending task in a backoff": _ALL_IN_BACKOFF,
}


def _chosen(name: str, only: list[str] | None) -> bool:
    return only is None or any(word in name.lower() for word in only)


async def measure(
    big: Harness, small: Harness, rounds: int, only: list[str] | None = None
) -> tuple[dict[str, tuple[float, float]], dict]:
    """p50 ms per operation: (big, small), the two taking turns; and the console pages' sizes in bytes
    per side. Last, a claim that finds nothing (it works out why from every unfinished task: not
    constant yet), over fewer rounds."""
    async with console_pages(big) as (pages_big, size_big), console_pages(small) as (pages_small, size_small):
        ops_big, ops_small = _operations(big) | pages_big, _operations(small) | pages_small
        ops_big = {name: op for name, op in ops_big.items() if _chosen(name, only)}
        out = await _turns(ops_big, {name: ops_small[name] for name in ops_big}, rounds)
        sizes = {name: (size_big[name], size_small[name]) for name in size_big if name in ops_big}
    me = Identity(WORKSPACE, "bench")
    for name, change in EMPTY_CLAIMS.items():
        if not _chosen(name, only):
            continue
        for h in (big, small):
            async with h.db.write() as conn:
                for query in change:
                    await conn.execute(query, {"ws": WORKSPACE, "later": time.time() + 86400})
            if not h.db.is_sqlite:  # as autovacuum would after so many changed rows
                async with h.db.single() as conn:
                    await conn.execute(_VACUUM)
        claims = (
            {name: lambda: big.tasks.claim(me, ClaimTaskArgs())},
            {name: lambda: small.tasks.claim(me, ClaimTaskArgs())},
        )
        out |= await _turns(*claims, max(5, rounds // 10))
    return out, sizes


#: the Host the console is asked for (the shared server on a loopback port answers it)
CONSOLE_HOST = "127.0.0.1:8765"
_OLDER_EVENTS = Query(
    "SELECT id FROM task_events WHERE workspace = :ws AND task_key = :key ORDER BY id LIMIT 1 OFFSET 100",
    name="bench_older_events",
)


@asynccontextmanager
async def console_pages(
    h: Harness,
) -> AsyncIterator[tuple[dict[str, Callable[[], Awaitable[Any]]], dict[str, int]]]:
    """The console's pages as a person gets them: a GET through the console's real ASGI app, mounted as
    the shared HTTP server mounts it (a token sign-in whose session is looked up on every request, the
    "needs you" bar, the template rendered in a worker thread), in this process and event loop, with no
    socket in between (uvicorn's parsing costs the same at any size). Also the size of each page in
    bytes, as its last call got it."""
    token = await h.tokens.create(WORKSPACE, "olga", "operator")  # an operator's pages carry the action forms
    async with h.db.read() as conn:
        oldest = await conn.fetch_value(_OLDER_EVENTS, {"ws": WORKSPACE, "key": HOT_TASK})
    routes = console_routes(h, TokenLogin(h.console_sessions), allowed_hosts=[CONSOLE_HOST], metrics_open=False)
    app = Starlette(routes=routes)
    base = f"http://{CONSOLE_HOST}"
    live = {"hx-request": "true", "hx-target": "live", "hx-trigger": "live", "hx-current-url": f"{base}/ui/board"}
    paths = {
        "page: board": ("/ui/board", {}),
        "page: board, a live refresh (its live part)": ("/ui/board", live),
        "page: task with the most events (see below)": (f"/ui/task?key={HOT_TASK}", {}),
        "(info) page: that task's oldest events (its last 'older events' page)": (
            f"/ui/task?key={HOT_TASK}&events_before={oldest}",
            {},
        ),
        "page: graph": ("/ui/graph", {}),
        "page: timeline (progress and task events)": ("/ui/log", {}),
    }
    sizes: dict[str, int] = {}
    async with httpx2.AsyncClient(transport=httpx2.ASGITransport(app=app), base_url=base) as client:
        signed = await client.post("/ui/login", data={"token": token}, headers={"origin": base})
        if signed.status_code != 303:
            raise RuntimeError(f"console sign-in: {signed.status_code} {signed.text[:200]}")

        def get(name: str, path: str, headers: dict[str, str]) -> Callable[[], Awaitable[Any]]:
            url = path + ("&" if "?" in path else "?") + f"w={WORKSPACE}"

            async def call() -> None:
                got = await client.get(url, headers=headers)
                if got.status_code != 200:
                    raise RuntimeError(f"{name}: {got.status_code} {got.text[:200]}")
                sizes[name] = len(got.content)

            return call

        ops = {name: get(name, path, headers) for name, (path, headers) in paths.items()}
        for call in ops.values():
            await call()  # every page answers before any is timed
        yield ops, sizes


async def _turns(
    ops_big: dict[str, Callable[[], Awaitable[Any]]], ops_small: dict[str, Callable[[], Awaitable[Any]]], rounds: int
) -> dict[str, tuple[float, float]]:
    out = {}
    for name in ops_big:
        times: dict[str, list[float]] = {"big": [], "small": []}
        for i in range(rounds + 5):
            order = (("big", ops_big), ("small", ops_small)) if i % 2 else (("small", ops_small), ("big", ops_big))
            for side, ops in order:
                t0 = time.perf_counter()
                await ops[name]()
                if i >= 5:  # warm-up rounds left out
                    times[side].append((time.perf_counter() - t0) * 1000)
        out[name] = (statistics.median(times["big"]), statistics.median(times["small"]))
    return out


async def _pg_databases(url: str, names: list[str], drop: bool) -> None:
    import asyncpg

    admin = await asyncpg.connect(
        url.replace("postgresql+asyncpg://", "postgresql://", 1).rsplit("/", 1)[0] + "/postgres"
    )
    try:
        for name in names:
            await admin.execute(
                f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)' if drop else f'CREATE DATABASE "{name}"'
            )
    finally:
        await admin.close()


async def run_backend(
    url: str | None, sizes: dict[str, tuple[int, int, int]], rounds: int, tmp: Path, only: list[str] | None = None
) -> tuple[dict[str, tuple[float, float]], dict[str, tuple[int, int]]]:
    """Build both databases on one backend (url None: SQLite files under tmp), measure, clean up."""
    if url is None:
        urls = {side: f"sqlite+aiosqlite:///{tmp / (side + '.db')}" for side in sizes}
    else:
        names = {side: f"mcp_harness_scale_{side}_{secrets.token_hex(3)}" for side in sizes}
        await _pg_databases(url, list(names.values()), drop=False)
        base = url.rsplit("/", 1)[0]
        urls = {side: f"{base}/{name}" for side, name in names.items()}
    try:
        harnesses = {}
        for side in sizes:
            print(f"{'sqlite' if url is None else 'postgresql'} {side}: building", flush=True)
            harnesses[side] = Harness.open(Settings.from_env(urls[side]))
        opened = {side: await cm.__aenter__() for side, cm in harnesses.items()}
        try:
            for side, h in opened.items():
                started = time.perf_counter()
                await build(h, *sizes[side], say=lambda m: print(m, flush=True), messages=MESSAGES[side])
                print(f"  built in {time.perf_counter() - started:.0f} s", flush=True)
            return await measure(opened["big"], opened["small"], rounds, only)
        finally:
            for cm in harnesses.values():
                await cm.__aexit__(None, None, None)
    finally:
        if url is not None:
            await _pg_databases(url, list(names.values()), drop=True)


PATHS_LIMIT_RATIO = 1.5


async def _reserved(h: Harness, workspace: str, held: int, rounds: int) -> Callable[[], Awaitable[Any]]:
    """A workspace where `held` agents each hold a task whose paths (a folder and a file of their own) are
    reserved, and `rounds` more such tasks wait: the claim to time takes one, reserving its paths past
    every live reservation, then hands it back (untimed) so the count of live reservations stays."""
    planner = Identity(workspace, "planner")
    specs = [
        {
            "key": f"p{i:05d}",
            "title": f"paths {i}",
            "priority": 1 if i < held else 0,
            "paths": [f"src/area{i:05d}/", f"docs/area{i:05d}.md"],
        }
        for i in range(held + rounds + 10)
    ]
    for start in range(0, len(specs), 500):
        await h.tasks.add(planner, AddTasksArgs(tasks=specs[start : start + 500]))
    for i in range(held):
        await h.tasks.claim(Identity(workspace, f"holder-{i}"), ClaimTaskArgs(lease_seconds=86400))
    me = Identity(workspace, "bench")

    async def claim_and_hand_back() -> None:
        got = await h.tasks.claim(me, ClaimTaskArgs(lease_seconds=3600))
        assert got.task is not None and got.lease is not None, got.reason
        await h.tasks.update(
            me,
            UpdateTaskArgs(task_key=got.task.key, action="complete", lease_token=got.lease.token, verification="bench"),
        )

    return claim_and_hand_back


async def paths_claims(url: str | None, rounds: int, tmp: Path) -> tuple[float, float]:
    """p50 ms of a claim of a task with paths (and its complete): (1,000 live reservations, none)."""
    db = url
    name = f"mcp_harness_scale_paths_{secrets.token_hex(3)}"
    if url is None:
        db = f"sqlite+aiosqlite:///{tmp / 'paths.db'}"
    else:
        await _pg_databases(url, [name], drop=False)
        db = f"{url.rsplit('/', 1)[0]}/{name}"
    try:
        async with Harness.open(Settings.from_env(db)) as h:
            many = await _reserved(h, "paths-many", 1000, rounds + 5)
            none = await _reserved(h, "paths-none", 0, rounds + 5)
            name_ = "claim_task with paths (+ complete): 1,000 live reservations vs none"
            out = await _turns({name_: many}, {name_: none}, rounds)
            return out[name_]
    finally:
        if url is not None:
            await _pg_databases(url, [name], drop=True)


def wake(url: str | None, rounds: int) -> str:
    """tools/bench_wake.py's p50 line for one backend (PostgreSQL: on a database of its own, made and dropped)."""
    cmd = [sys.executable, str(Path(__file__).with_name("bench_wake.py")), "--rounds", str(rounds)]
    name = f"mcp_harness_scale_wake_{secrets.token_hex(3)}"
    if url is not None:
        anyio.run(_pg_databases, url, [name], False)
        cmd += ["--db", f"{url.rsplit('/', 1)[0]}/{name}"]
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    finally:
        if url is not None:
            anyio.run(_pg_databases, url, [name], True)
    lines = [line.strip() for line in out.stdout.splitlines() if "p50" in line]
    return "; ".join(lines) if out.returncode == 0 else f"bench_wake failed: {out.stderr.strip()[-300:]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    pg_help = "PostgreSQL URL (postgresql+asyncpg://...): two databases are made there, then dropped"
    parser.add_argument("--postgres", default=os.environ.get("MCP_HARNESS_TEST_POSTGRES_URL"), help=pg_help)
    parser.add_argument("--no-sqlite", action="store_true", help="PostgreSQL only")
    parser.add_argument("--quick", action="store_true", help="big = 10,000 tasks / 100,000 entries / 1,000 checkpoints")
    parser.add_argument("--rounds", type=int, default=200, help="timed calls per operation and side")
    parser.add_argument("--wake", action="store_true", help="also run tools/bench_wake.py on each backend")
    parser.add_argument("--paths", action="store_true", help="also: claims past 1,000 live path reservations")
    only_help = "time only the operations whose name holds one of these words (comma-separated), e.g. page,board"
    parser.add_argument("--only", help=only_help)
    args = parser.parse_args()
    only = [word.strip().lower() for word in args.only.split(",") if word.strip()] if args.only else None
    big = (10_000, 100_000, 1_000) if args.quick else (100_000, 1_000_000, 10_000)
    sizes = {"big": big, "small": (1_000, 10_000, 100)}
    backends = ([] if args.no_sqlite else [None]) + ([args.postgres] if args.postgres else [])
    results, page_sizes, wakes, reserved = {}, {}, {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for url in backends:
            name = "sqlite" if url is None else "postgresql"
            results[name], page_sizes[name] = anyio.run(run_backend, url, sizes, args.rounds, Path(tmp), only)
            if args.wake:
                wakes[name] = wake(url, 60)
            if args.paths:
                reserved[name] = anyio.run(paths_claims, url, min(args.rounds, 100), Path(tmp))
    print()
    print(
        f"big: {big[0]:,} tasks, {big[1]:,} progress entries, {big[2]:,} checkpoints; small: 1,000 / 10,000 / 100;"
        f" p50 of {args.rounds} in-process calls each; Python {platform.python_version()}, SQLite "
        f"{sqlite3.sqlite_version}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}"
    )
    hot = [round(n * HOT_EVENTS_PER_TASK) for n in (big[0], sizes["small"][0])]
    print(
        f"The task with the most events ({HOT_TASK}, the console's task page): {hot[0]:,} events on the big side,"
        f" {hot[1]:,} on the small side (the same share of a workspace's events: the same page at each size)."
    )
    print()
    print("| backend | operation | big p50 | small p50 | ratio | <= 2x |")
    print("|---|---|---|---|---|---|")
    worst = 0.0
    for backend, figures in results.items():
        for op, (b, s) in figures.items():
            ratio = b / s
            met = "yes" if ratio <= LIMIT_RATIO else "NO"
            if op.startswith("(info)"):
                met = "-"
            else:
                worst = max(worst, ratio)
            print(f"| {backend} | {op} | {b:.3f} ms | {s:.3f} ms | {ratio:.2f}x | {met} |")
    for backend, (many, none) in reserved.items():
        ratio = many / none
        met = "yes" if ratio <= PATHS_LIMIT_RATIO else "NO"
        worst = max(worst, ratio * LIMIT_RATIO / PATHS_LIMIT_RATIO)  # gated at 1.5x
        print(
            f"| {backend} | claim_task with paths: 1,000 live reservations / none (<= 1.5x) | {many:.3f} ms "
            f"| {none:.3f} ms | {ratio:.2f}x | {met} |"
        )
    for backend, pages in page_sizes.items():
        shown = "; ".join(
            f"{name.removeprefix('page: ')} {b / 1024:,.0f} KB / {s / 1024:,.0f} KB"
            for name, (b, s) in pages.items()
            if not name.startswith("(info)")
        )
        print(f"\nconsole pages, bytes big / small ({backend}): {shown}")
    for backend, line in wakes.items():
        print(f"\nwake-up ({backend}, tools/bench_wake.py, 60 rounds): {line}")
    sys.exit(0 if worst <= LIMIT_RATIO else 1)


if __name__ == "__main__":
    main()
