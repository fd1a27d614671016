"""The floor under `bench_claims.py --db postgresql+...`: the same claim and complete SQL that the
harness runs, sent straight through bare asyncpg (no harness, no SQLAlchemy, no result models), with
the same processes x connections. What the harness reaches relative to this is its own overhead;
what this reaches is what the machine and PostgreSQL allow.

    python tools/pg_claim_floor.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/bench --processes 8 --workers 32
"""

from __future__ import annotations

import argparse
import asyncio
import multiprocessing as mp
import secrets
import sys
import time
from pathlib import Path

import asyncpg

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_harness.messages.service import windows
from mcp_harness.store import Database
from mcp_harness.store.connection import Query  # noqa: E402
from mcp_harness.store.urls import pg_dsn as asyncpg_dsn  # noqa: E402
from mcp_harness.tasks.store import queries  # noqa: E402

DONE_COLUMNS = (
    "completed_at",
    "last_error",
    "lease_expires_at",
    "ready",
    "result",
    "status",
    "updated_at",
    "verification",
)


def _args(query: Query, values: dict) -> list:
    return [values[n] for n in query.pg_names]


def _worker(dsn: str, workspace: str, connections: int, ready, go, out) -> None:
    # as a served claim and complete run them: the contact row with each, the claim's handoff facts
    claim = queries.claim(False, False, "first", contact=True, facts=True)
    done = queries.update_leased(DONE_COLUMNS, True, logged=True, contact=True)

    async def main() -> int:
        pool = await asyncpg.create_pool(dsn, min_size=connections, max_size=connections)
        ready.put(1)
        while not go.is_set():
            await asyncio.sleep(0.001)
        count = 0

        async def loop() -> None:
            nonlocal count
            me = f"floor-{secrets.token_hex(3)}"  # a contact row per connection: none waits on another's
            while True:
                at = time.time()
                values = {
                    "ws": workspace,
                    "now": at,
                    "agent": "floor",
                    "token": secrets.token_urlsafe(18),
                    "expires": at + 300,
                    "lease": 300,
                    "fp": "floor",
                    "process": None,
                    "c_agent": me,
                    "c_at": at,
                    "c_tool": "claim_task",
                    "c_outcome": "claimed",
                    "me": "floor",
                    "base": "floor",
                    "ops": "",
                    **windows(),  # where the unread count's windows start, as a served claim's
                }
                async with pool.acquire() as conn:
                    rows = await conn.fetch(claim.postgresql, *_args(claim, values))
                if not rows:
                    return
                values = {
                    "ws": workspace,
                    "key": rows[0]["key"],
                    "token": rows[0]["lease_token"],
                    "v_status": "done",
                    "v_ready": False,
                    "v_result": None,
                    "v_verification": "floor",
                    "v_completed_at": at,
                    "v_lease_expires_at": None,
                    "v_updated_at": at,
                    "v_last_error": None,
                    "ev_kind": "complete",
                    "ev_actor": "floor",
                    "ev_detail": None,
                    "ev_at": at,
                    "c_agent": me,
                    "c_at": at,
                    "c_tool": "update_task",
                    "c_outcome": "completed",
                }
                async with pool.acquire() as conn:
                    await conn.fetch(done.postgresql, *_args(done, values))
                count += 1

        await asyncio.gather(*(loop() for _ in range(connections)))
        await pool.close()
        return count

    try:
        out.put(asyncio.run(main()))
    except BaseException as exc:  # the parent reports it (a worker that dies silently would hang it)
        out.put(f"{type(exc).__name__}: {exc}")
        raise


async def _setup(url: str, dsn: str, workspace: str, tasks: int) -> None:
    db = Database(url)
    await db.open()  # the harness's schema
    await db.close()
    conn = await asyncpg.connect(dsn)
    await conn.executemany(
        "INSERT INTO tasks (workspace, key, title, steps, priority, depends_on, tags, max_attempts, dependents, "
        "content_hash, status, ready, blocked, attempts, available_at, created_at, updated_at) "
        "VALUES ($1, $2, 't', '[]', 0, '[]', '[]', 3, 0, 'h', 'pending', true, false, 0, 0, 0, 0)",
        [(workspace, f"t{i}") for i in range(tasks)],
    )
    await conn.execute("ANALYZE tasks")
    await conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", required=True, help="postgresql+asyncpg://... URL")
    parser.add_argument("--processes", type=int, default=8)
    parser.add_argument("--workers", type=int, default=32, help="total connections, spread over processes")
    parser.add_argument("--tasks", type=int, default=4000)
    args = parser.parse_args()
    dsn, _cache = asyncpg_dsn(args.db)
    workspace = f"floor-{secrets.token_hex(4)}"
    asyncio.run(_setup(args.db, dsn, workspace, args.tasks))
    ready, out, go = mp.Queue(), mp.Queue(), mp.Event()
    per = max(1, args.workers // args.processes)
    procs = [mp.Process(target=_worker, args=(dsn, workspace, per, ready, go, out)) for _ in range(args.processes)]
    for p in procs:
        p.start()
    for _ in procs:
        ready.get()
    start = time.perf_counter()
    go.set()
    got = [out.get(timeout=600) for _ in procs]
    failed = [g for g in got if isinstance(g, str)]
    if failed:
        raise SystemExit(f"a worker failed: {failed[0]}")
    total = sum(got)
    elapsed = time.perf_counter() - start
    for p in procs:
        p.join()
    print(
        f"{args.processes} processes x {per} connections: {total / elapsed:,.0f} claim+complete/s "
        f"({total}/{args.tasks} in {elapsed:.2f} s)"
    )
    if total != args.tasks:
        raise SystemExit(f"expected {args.tasks} completions, got {total}")


if __name__ == "__main__":
    main()
