"""Claim+complete throughput with several worker processes on one database.

Each worker process opens its own harness (as a server process would) and loops claim -> complete
until the list is drained. Reports tasks/s per process count and checks that every task was
completed exactly once (a duplicate accepted completion would fail the run).

    python tools/bench_claims.py                       # SQLite file, 1, 4 and 8 processes, 4,000 tasks
    python tools/bench_claims.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/bench --workers 32
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_harness.config import Settings  # noqa: E402
from mcp_harness.models import TaskSpec  # noqa: E402
from mcp_harness.service import Harness, Identity  # noqa: E402


def _worker(db: str, workspace: str, index: int, concurrency: int, start_at: float, out: mp.Queue) -> None:
    async def loop(h: Harness, ident: Identity, done: list[str], errors: list[str]) -> None:
        while True:
            got = await h.tasks.claim(ident, lease_seconds=300)
            if got.task is None:
                if got.reason in ("all_done", "none_pending"):
                    return
                await anyio.sleep(0.001)
                continue
            try:
                await h.tasks.update(
                    ident, task_key=got.task.key, action="complete", lease_token=got.lease.token, verification="bench"
                )
                done.append(got.task.key)
            except Exception as exc:  # noqa: BLE001 - counted and reported, the run goes on
                errors.append(str(exc))

    async def main() -> None:
        settings = Settings.from_env(db)
        async with Harness.open(settings) as h:
            while time.time() < start_at:
                await anyio.sleep(0.001)
            done: list[str] = []
            errors: list[str] = []
            async with anyio.create_task_group() as tg:
                for lane in range(concurrency):
                    tg.start_soon(loop, h, Identity(workspace=workspace, agent=f"w{index}-{lane}"), done, errors)
            out.put((done, errors, time.time()))

    anyio.run(main)


async def _seed(db: str, workspace: str, n: int) -> None:
    async with Harness.open(Settings.from_env(db)) as h:
        ident = Identity(workspace=workspace, agent="seeder")
        for start in range(0, n, 1000):
            specs = [TaskSpec(key=f"t{i}", title=f"task {i}") for i in range(start, min(n, start + 1000))]
            await h.tasks.add(ident, tasks=specs)


def run(db: str, processes: int, tasks: int, concurrency: int) -> dict:
    workspace = f"bench-{processes}p-{os.getpid()}-{time.time_ns() % 10**9}"
    anyio.run(_seed, db, workspace, tasks)
    ctx = mp.get_context("spawn")
    out: mp.Queue = ctx.Queue()
    start_at = time.time() + 2.0  # every process connected and warm before the clock starts
    procs = [ctx.Process(target=_worker, args=(db, workspace, i, concurrency, start_at, out)) for i in range(processes)]
    for p in procs:
        p.start()
    results = [out.get(timeout=600) for _ in procs]
    for p in procs:
        p.join()
    completed = [k for done, _e, _t in results for k in done]
    errors = [e for _d, errs, _t in results for e in errs]
    elapsed = max(t for _d, _e, t in results) - start_at
    dupes = [k for k, c in Counter(completed).items() if c > 1]
    return {
        "processes": processes,
        "workers": processes * concurrency,
        "tasks": tasks,
        "completed": len(completed),
        "duplicates": len(dupes),
        "errors": len(errors),
        "locked_errors": sum("locked" in e for e in errors),
        "seconds": round(elapsed, 2),
        "per_second": round(len(completed) / elapsed, 1),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="database URL or path (default: a new SQLite file)")
    parser.add_argument("--processes", type=int, nargs="+", default=None, help="process counts (default 1 4 8)")
    parser.add_argument("--workers", type=int, default=None, help="total concurrent workers, spread over processes")
    parser.add_argument("--tasks", type=int, default=4000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    db = args.db or str(Path(tempfile.mkdtemp()) / "bench.db")
    counts = args.processes or ([min(8, args.workers)] if args.workers else [1, 4, 8])
    rows = []
    for n in counts:
        concurrency = max(1, (args.workers or n) // n)
        row = run(db, n, args.tasks, concurrency)
        rows.append(row)
        if not args.json:
            print(
                f"{row['processes']} processes x {concurrency} workers: {row['per_second']:>8.1f} claim+complete/s "
                f"({row['completed']}/{row['tasks']} in {row['seconds']} s; duplicates {row['duplicates']}, "
                f"errors {row['errors']}, locked {row['locked_errors']})"
            )
    if args.json:
        print(json.dumps({"db": db.split("@")[-1], "runs": rows}))
    bad = any(r["duplicates"] or r["completed"] != r["tasks"] or r["locked_errors"] for r in rows)
    return 1 if bad else 0


if __name__ == "__main__":
    raise SystemExit(main())
