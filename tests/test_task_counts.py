"""Task counts come from counters that database triggers keep (migration 6): after any mix of adds,
claims, take-overs, completions, failures, releases, reopens, blocked dependencies, deletes and an
import, they equal a real GROUP BY over the tasks, on both backends; a status the code does not know
is counted too; and on PostgreSQL several processes claiming at once neither deadlock nor lose a count."""

from __future__ import annotations

import random
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from sqlalchemy import text
from sqlalchemy.ext.asyncio import create_async_engine
from support import settings_for

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, ListTasksArgs, RestoreStateArgs, UpdateTaskArgs
from mcp_harness.errors import HarnessError
from mcp_harness.service import Harness, Identity
from mcp_harness.tasks.reasons import _bounded_roots as bounded_roots
from mcp_harness.tasks.reasons import empty_claim_reason

pytestmark = pytest.mark.anyio


async def _sql(url: str, sql: str, **params: object) -> list[tuple]:
    engine = create_async_engine(url)
    try:
        async with engine.begin() as conn:
            result = await conn.execute(text(sql), params)
            return [tuple(r) for r in result.all()] if result.returns_rows else []
    finally:
        await engine.dispose()


async def truth(url: str, workspace: str) -> dict[tuple[str, bool], int]:
    """(status, blocked) -> tasks, counted the slow way."""
    rows = await _sql(
        url, "SELECT status, blocked, count(*) FROM tasks WHERE workspace = :ws GROUP BY status, blocked", ws=workspace
    )
    return {(s, bool(b)): int(n) for s, b, n in rows}


async def counters(url: str, workspace: str) -> dict[tuple[str, bool], int]:
    """(status, blocked) -> the triggers' count (keys whose count is 0 left out)."""
    rows = await _sql(
        url,
        "SELECT status, blocked, sum(n) FROM task_counts WHERE workspace = :ws GROUP BY status, blocked",
        ws=workspace,
    )
    return {(s, bool(b)): int(n) for s, b, n in rows if int(n) != 0}


def shown(raw: dict[tuple[str, bool], int]) -> dict[str, int]:
    """As the tools show counts: pending behind a failed dependency is `blocked`."""
    out = {"pending": 0, "claimed": 0, "in_review": 0, "done": 0, "failed": 0, "cancelled": 0, "blocked": 0}
    for (status, blocked), n in raw.items():
        key = "blocked" if status == "pending" and blocked else status
        out[key] = out.get(key, 0) + n
    return out


async def _random_step(h: Harness, rng: random.Random, agents: list[Identity], held: dict, added: list[str]) -> None:
    ident = rng.choice(agents)
    move = rng.random()
    if move < 0.15:
        base = len(added)
        specs = []
        for i in range(rng.randint(1, 6)):
            key = f"t{base + i}"
            deps = rng.sample(added, k=min(len(added), rng.randint(0, 2))) if added else []
            kind = rng.choices(["work", "review", "gate"], weights=[6, 2, 1])[0]
            specs.append(
                {
                    "key": key,
                    "title": f"task {key}",
                    "depends_on": deps,
                    "max_attempts": rng.randint(1, 3),
                    "review": kind == "review",
                    "kind": "gate" if kind == "gate" else "work",
                }
            )
        await h.tasks.add(ident, AddTasksArgs(tasks=specs))
        added.extend(s["key"] for s in specs)
    elif move < 0.45:
        got = await h.tasks.claim(ident, ClaimTaskArgs(lease_seconds=30))
        if got.task is not None:
            held[got.task.key] = (ident, got.lease.token)
    elif move < 0.85 and held:
        key = rng.choice(sorted(held))
        owner, token = held.pop(key)
        action = rng.choice(["complete", "complete", "fail", "fail_final", "release", "heartbeat"])
        fields: dict = {"task_key": key, "lease_token": token, "action": action}
        if action == "complete":
            fields["verification"] = "checked"
        elif action.startswith("fail"):
            fields.update(action="fail", error="broke", retry=action == "fail")
        elif action == "heartbeat":
            held[key] = (owner, token)
        await h.tasks.update(owner, UpdateTaskArgs(**fields))
    elif move < 0.89 and added:
        key = rng.choice(added)
        await h.tasks.update(ident, UpdateTaskArgs(task_key=key, action="reopen", reason="again"))
    elif move < 0.93 and added:  # a person decides: approve, reject or cancel
        person = Identity(ident.workspace, "olga", role="operator")
        action = rng.choice(["approve", "approve", "reject", "cancel"])
        text = {"reject": {"comment": "redo"}, "cancel": {"reason": "not needed"}}.get(action, {})
        await h.tasks.update(person, UpdateTaskArgs(task_key=rng.choice(added), action=action, **text))
    else:
        clock.advance(rng.choice([10, 40, 400]))  # leases run out (take-overs, expiries); backoffs end


async def test_counters_match_a_group_by_after_random_operations(db_url: str, workspace: str) -> None:
    rng = random.Random(18)
    agents = [Identity(workspace, f"agent-{i}") for i in range(3)]
    held: dict = {}
    added: list[str] = []
    async with Harness.open(settings_for(db_url, backoff_base_seconds=1.0)) as h:
        for step in range(400):
            try:
                await _random_step(h, rng, agents, held, added)
            except HarnessError:
                pass  # a refused move (a lease lost to a take-over, a reopen of an open task) changes nothing
            if step % 50 == 49:
                assert await counters(db_url, workspace) == await truth(db_url, workspace), f"after step {step}"
        await h.tasks.add(agents[0], AddTasksArgs(tasks=[{"key": "last", "title": "held at the end", "priority": 9}]))
        assert (await h.tasks.claim(agents[0], ClaimTaskArgs())).task is not None
        real = await truth(db_url, workspace)
        assert {s for s, _b in real} >= {"pending", "claimed", "done", "failed"}, real  # the mix reached them
        assert any(b for _s, b in real), "a failed dependency blocked some task"
        assert await counters(db_url, workspace) == real
        listing = await h.tasks.list(agents[0], ListTasksArgs(limit=1))
        assert listing.counts.model_dump() == shown(real)
        assert (await h.restore(agents[0], RestoreStateArgs())).task_counts.model_dump() == shown(real)
        board = await h.console.board(agents[0], per_column=1)
        assert {c.status: c.total for c in board.columns} == shown(real)

        # a delete (no tool deletes tasks; an import that replaced a workspace would) is counted out
        await _sql(db_url, "DELETE FROM tasks WHERE workspace = :ws AND \"key\" IN ('t0', 't1')", ws=workspace)
        assert await counters(db_url, workspace) == await truth(db_url, workspace)


async def test_an_empty_claim_reads_the_roots_directly_and_agrees_with_the_walk(db_url: str, workspace: str) -> None:
    """An unfiltered claim that finds nothing reads a few roots of each kind instead of every unfinished
    task (bounded by the backlog no more): after a random mix of operations its answer is the walk's."""
    rng = random.Random(7)
    agents = [Identity(workspace, f"agent-{i}") for i in range(3)]
    held: dict = {}
    added: list[str] = []
    reasons = set()
    async with Harness.open(settings_for(db_url, backoff_base_seconds=30.0)) as h:
        for step in range(300):
            try:
                await _random_step(h, rng, agents, held, added)
            except HarnessError:
                pass
            if step % 10 == 9:
                at = clock.now()
                async with h.db.read() as conn:
                    direct = await empty_claim_reason(conn, workspace, at=at, tags=None, task_key=None)
                    walked = await empty_claim_reason(conn, workspace, at=at, tags=None, task_key=None, walk=True)
                assert direct == walked, f"after step {step}"
                reasons.add(walked.reason)
        # and the workspaces where nothing waits on a lease or a backoff: only failures, all done, empty
        other = Identity(f"{workspace}-b", "a")
        for step in ("empty", "failed", "done", "review"):
            if step == "failed":
                await h.tasks.add(
                    other,
                    AddTasksArgs(tasks=[{"key": "a", "title": "a"}, {"key": "b", "title": "b", "depends_on": ["a"]}]),
                )
                got = await h.tasks.claim(other, ClaimTaskArgs())
                await h.tasks.update(
                    other,
                    UpdateTaskArgs(task_key="a", action="fail", lease_token=got.lease.token, error="x", retry=False),
                )
            elif step == "done":
                await h.tasks.update(other, UpdateTaskArgs(task_key="a", action="reopen", reason="again"))
                for key in ("a", "b"):
                    got = await h.tasks.claim(other, ClaimTaskArgs())
                    await h.tasks.update(
                        other,
                        UpdateTaskArgs(task_key=key, action="complete", lease_token=got.lease.token, verification="ok"),
                    )
            elif step == "review":  # a gate whose dependency is done waits on a person, and so does c
                await h.tasks.add(
                    other,
                    AddTasksArgs(
                        tasks=[
                            {"key": "g", "title": "sign-off", "kind": "gate", "depends_on": ["a"]},
                            {"key": "c", "title": "c", "depends_on": ["g"]},
                        ]
                    ),
                )
            async with h.db.read() as conn:
                direct = await empty_claim_reason(conn, other.workspace, at=clock.now(), tags=None, task_key=None)
                walked = await empty_claim_reason(
                    conn, other.workspace, at=clock.now(), tags=None, task_key=None, walk=True
                )
                read_directly = await bounded_roots(conn, other.workspace, clock.now())
            assert direct == walked, step
            assert read_directly is not None, f"{step}: the walk was used"  # in review and cancelled are covered
            reasons.add(walked.reason)
    assert reasons >= {
        "backoff",
        "all_claimed",
        "waiting_on_review",
        "blocked_by_failure",
        "all_done",
        "none_pending",
    }, reasons


async def test_a_status_the_code_does_not_know_is_counted(db_url: str, workspace: str) -> None:
    """A status another change adds (`in_review`) is counted by the triggers with no code change: the
    board and the metrics list it; the tools' counts show the statuses their model names, and do not fail."""
    ident = Identity(workspace, "a")
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(ident, AddTasksArgs(tasks=[{"key": "a", "title": "A"}, {"key": "b", "title": "B"}]))
        review = "UPDATE tasks SET status = 'in_review' WHERE workspace = :ws AND \"key\" = 'a'"
        await _sql(db_url, review, ws=workspace)
        assert await counters(db_url, workspace) == {("in_review", False): 1, ("pending", False): 1}
        assert (await h.restore(ident, RestoreStateArgs())).task_counts.model_dump()["pending"] == 1
        by_workspace, _expired = await h.console.metrics()
        assert (workspace, "in_review", 1) in by_workspace


async def test_an_import_is_counted(tmp_path: Path, workspace: str) -> None:
    """Imported tasks (inserted by the cold path, not the tools) are counted by the same triggers."""
    source, target = (f"sqlite+aiosqlite:///{tmp_path / n}" for n in ("a.db", "b.db"))
    ident = Identity(workspace, "a")
    async with Harness.open(settings_for(source)) as h:
        await h.tasks.add(ident, AddTasksArgs(tasks=[{"key": k, "title": k} for k in "abc"]))
        got = await h.tasks.claim(ident, ClaimTaskArgs())
        await h.tasks.update(
            ident,
            UpdateTaskArgs(task_key=got.task.key, action="complete", lease_token=got.lease.token, verification="ok"),
        )
        lines = [line async for line in h.maintenance.export(workspace)]
    async with Harness.open(settings_for(target)) as h:
        await h.maintenance.import_lines(lines)
        assert (await h.tasks.list(ident, ListTasksArgs())).counts.model_dump() == shown(
            {("pending", False): 2, ("done", False): 1}
        )
    assert await counters(target, workspace) == await truth(target, workspace)


_CLAIMER = textwrap.dedent("""
    import asyncio, sys
    from mcp_harness.arguments import ClaimTaskArgs, UpdateTaskArgs
    from mcp_harness.config import Settings
    from mcp_harness.service import Harness, Identity

    async def main(url, workspace, agent):
        done = 0
        async with Harness.open(Settings.from_env(url)) as h:
            ident = Identity(workspace, agent)
            while True:
                got = await h.tasks.claim(ident, ClaimTaskArgs(lease_seconds=60))
                if got.task is None:
                    break
                fields = dict(task_key=got.task.key, lease_token=got.lease.token)
                if got.task.key.endswith("7"):
                    await h.tasks.update(ident, UpdateTaskArgs(action="fail", error="no", retry=False, **fields))
                else:
                    await h.tasks.update(ident, UpdateTaskArgs(action="complete", verification="ok", **fields))
                done += 1
        print(done)

    asyncio.run(main(*sys.argv[1:]))
""")


@pytest.mark.slow
async def test_processes_claiming_at_once_on_postgres_keep_counts_right(postgres_url: str, workspace: str) -> None:
    """Six processes claim and finish 600 tasks (several tasks per add, so adds and claims overlap):
    no deadlock, no error, every task finished once, the counters equal the GROUP BY, and the counter
    rows stay few (slots are reused once their transaction ends)."""
    ident = Identity(workspace, "lead")
    async with Harness.open(settings_for(postgres_url)) as h:
        await h.tasks.add(ident, AddTasksArgs(tasks=[{"key": f"k{i:03d}", "title": f"task {i}"} for i in range(300)]))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", _CLAIMER, postgres_url, workspace, f"w{i}"],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(6)
    ]
    async with Harness.open(settings_for(postgres_url)) as h:  # more tasks while the claims run
        for start in range(300, 600, 20):
            batch = [{"key": f"k{i:03d}", "title": f"task {i}"} for i in range(start, start + 20)]
            await h.tasks.add(ident, AddTasksArgs(tasks=batch))
    finished = 0
    for p in procs:
        out, err = p.communicate(timeout=300)
        assert p.returncode == 0, err[-2000:]
        finished += int(out.strip())
    # a process may stop before the last adds: finish what is left here
    async with Harness.open(settings_for(postgres_url)) as h:
        while (got := await h.tasks.claim(ident, ClaimTaskArgs())).task is not None:
            action = "fail" if got.task.key.endswith("7") else "complete"
            extra = {"error": "no", "retry": False} if action == "fail" else {"verification": "ok"}
            await h.tasks.update(
                ident, UpdateTaskArgs(task_key=got.task.key, lease_token=got.lease.token, action=action, **extra)
            )
            finished += 1
    assert finished == 600
    real = await truth(postgres_url, workspace)
    assert real == {("done", False): 540, ("failed", False): 60}
    assert await counters(postgres_url, workspace) == real
    slots = await _sql(postgres_url, "SELECT count(*) FROM task_counts WHERE workspace = :ws", ws=workspace)
    assert slots[0][0] <= 4 * 7, slots  # (pending, claimed, done, failed) x at most 7 writers at once
