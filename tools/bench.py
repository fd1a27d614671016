"""Side by side with LangGraph's AsyncSqliteSaver: the same workloads, one table of ratios.

    pip install -e '.[bench]' && python tools/bench.py [--history 100000] [--out table.md]

Both stores write to files with synchronous=FULL. Workloads:
- one-key: a state of three keys (two 20 KB texts and a counter) where each save changes the counter;
- growing list: a message list that grows by one ~300-byte message per save.
Both stores stay open side by side and take turns in every comparison. Measured: write ops/s
(median of 5 blocks of --saves per side), restore-latest p50 (400 each), listing 2,000 history
entries (median of 9), bytes stored per checkpoint (file growth after a WAL checkpoint), our
restore-latest p50 on a thread of --history checkpoints vs one of 1,000 (two databases, 400
restores each), and `save_checkpoint` over stdio vs a no-op tool on the same MCP SDK in the same run
(1,000 calls each, taking turns).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sqlite3
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any

import anyio

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_harness.arguments import ListCheckpointsArgs, RestoreStateArgs, SaveCheckpointArgs
from mcp_harness.config import Settings  # noqa: E402
from mcp_harness.service import Harness, Identity  # noqa: E402

TEXT = "lorem ipsum dolor sit amet " * 760  # ~20 KB
MESSAGE = {"role": "assistant", "content": "word " * 56}  # ~300 bytes as JSON
IDENT = Identity("bench", "bench")
#: the one-key write workload runs this many blocks of --saves per side, the two sides taking turns;
#: the median block rate is kept (a block can land on a garbage collection; fsync latency swings)
WRITE_BLOCKS = 5
#: listings alternate between the two stores this many times, median kept
LISTING_ROUNDS = 9


def file_bytes(path: str) -> int:
    with sqlite3.connect(path) as conn:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return sum(os.path.getsize(p) for p in (path, path + "-wal") if os.path.exists(p))


def one_key_state(i: int) -> dict:
    # fresh string objects each time, as a state parsed from a client's JSON has
    return {"docs": TEXT[:-1] + TEXT[-1], "notes": TEXT[::-1], "counter": i}


def growing_state(i: int) -> dict:
    return {"messages": [{**MESSAGE, "n": n} for n in range(i + 1)]}


# -- the two stores side by side ---------------------------------------------------------------------
#
# Every comparison keeps both stores open and takes turns between them, so that the drift of a shared
# machine (fsync latency, CPU steal) falls on both sides alike rather than on whichever ran second.


@asynccontextmanager
async def side_by_side(ours_path: str, lg_path: str) -> AsyncIterator[tuple[Harness, Any]]:
    """Our store and LangGraph's `AsyncSqliteSaver`, each on its own file with synchronous=FULL."""
    from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver

    async with Harness.open(Settings.from_env(ours_path)) as h, AsyncSqliteSaver.from_conn_string(lg_path) as saver:
        await saver.setup()
        await saver.conn.execute("PRAGMA synchronous = FULL")
        yield h, saver


def lg_checkpoint(state: dict, step: int):
    from langgraph.checkpoint.base import empty_checkpoint

    cp = empty_checkpoint()
    cp["channel_values"] = dict(state)
    cp["channel_versions"] = {k: step for k in state}
    return cp


class LangGraphThread:
    """One LangGraph thread written the way a graph writes it: each checkpoint the child of the last."""

    def __init__(self, saver: Any, thread: str) -> None:
        self.saver = saver
        self.config = {"configurable": {"thread_id": thread, "checkpoint_ns": ""}}

    async def put(self, state: dict, step: int) -> None:
        self.config = await self.saver.aput(self.config, lg_checkpoint(state, step), {"step": step}, {})


async def writes(ours_path: str, lg_path: str, states, n: int, blocks: int = 1) -> tuple[float, float, int, int]:
    """Saves of `states(1..n)` on each side, in `blocks` turns: (our median rate over the blocks,
    LangGraph's, our bytes per checkpoint, LangGraph's)."""
    async with side_by_side(ours_path, lg_path) as (h, saver):
        theirs = LangGraphThread(saver, "w")
        await h.checkpoints.save(IDENT, SaveCheckpointArgs(state=states(0), thread="w"))
        await theirs.put(states(0), 0)
        ours_before, lg_before = file_bytes(ours_path), file_bytes(lg_path)
        ours_rates, lg_rates = [], []
        size = n // blocks
        for first in range(1, size * blocks + 1, size):
            steps = range(first, first + size)
            batch = [states(i) for i in steps]  # made before the clock starts, for each side
            start = time.perf_counter()
            for state in batch:
                await h.checkpoints.save(IDENT, SaveCheckpointArgs(state=state, thread="w"))
            ours_rates.append(size / (time.perf_counter() - start))
            batch = [states(i) for i in steps]
            start = time.perf_counter()
            for i, state in zip(steps, batch, strict=True):
                await theirs.put(state, i)
            lg_rates.append(size / (time.perf_counter() - start))
    saves = size * blocks
    return (
        statistics.median(ours_rates),
        statistics.median(lg_rates),
        (file_bytes(ours_path) - ours_before) // saves,
        (file_bytes(lg_path) - lg_before) // saves,
    )


async def restores(ours_path: str, lg_path: str, n: int = 400) -> tuple[float, float]:
    """p50 of restoring the latest checkpoint of thread `w`: ours, LangGraph's `aget_tuple`, in turn."""
    async with side_by_side(ours_path, lg_path) as (h, saver):
        config = {"configurable": {"thread_id": "w", "checkpoint_ns": ""}}
        ours, theirs = [], []
        for _ in range(n):
            start = time.perf_counter()
            await h.restore(IDENT, RestoreStateArgs(thread="w", progress_limit=0))
            ours.append(time.perf_counter() - start)
            start = time.perf_counter()
            await saver.aget_tuple(config)
            theirs.append(time.perf_counter() - start)
    return statistics.median(ours), statistics.median(theirs)


async def history_restores(small_path: str, deep_path: str, history: int, n: int = 400) -> tuple[float, float]:
    """Our restore-latest p50 on a database holding a thread of 1,000 checkpoints and on one holding
    a thread of `history`, both open, restores taking turns."""
    async with Harness.open(Settings.from_env(small_path)) as small, Harness.open(Settings.from_env(deep_path)) as deep:
        for h, count in ((small, 1000), (deep, history)):
            for i in range(count):
                await h.checkpoints.save(IDENT, SaveCheckpointArgs(state=one_key_state(i), thread="deep"))
        times: tuple[list[float], list[float]] = ([], [])
        for _ in range(n):
            for h, out in zip((small, deep), times, strict=True):
                start = time.perf_counter()
                await h.restore(IDENT, RestoreStateArgs(thread="deep", progress_limit=0))
                out.append(time.perf_counter() - start)
    return statistics.median(times[0]), statistics.median(times[1])


async def listings(ours_path: str, lg_path: str, entries: int) -> tuple[float, float]:
    """Median time to list `entries` history entries: ours (pages of 200, the maximum) and LangGraph's
    `alist`, the two timed in turn so that a slow patch of a shared machine falls on both."""
    async with side_by_side(ours_path, lg_path) as (h, saver):
        for i in range(entries):
            await h.checkpoints.save(IDENT, SaveCheckpointArgs(state={"i": i}, thread="hist"))
        theirs_thread = LangGraphThread(saver, "hist")
        for i in range(entries):
            await theirs_thread.put({"i": i}, i)
        ours, theirs = [], []
        for _ in range(LISTING_ROUNDS):
            start = time.perf_counter()
            seen, before = 0, None
            while True:
                page = await h.checkpoints.list(
                    IDENT, ListCheckpointsArgs(thread="hist", limit=200, before_version=before)
                )
                seen += len(page.checkpoints)
                if page.next_before_version is None:
                    break
                before = page.next_before_version
            ours.append(time.perf_counter() - start)
            assert seen == entries
            start = time.perf_counter()
            seen = 0
            async for _item in saver.alist({"configurable": {"thread_id": "hist"}}):
                seen += 1
            theirs.append(time.perf_counter() - start)
            assert seen == entries
    return statistics.median(ours), statistics.median(theirs)


# -- stdio round trip -------------------------------------------------------------------------------


def _stdio_client(command: list[str]) -> Any:
    from mcp import Client, StdioServerParameters

    env = {k: v for k, v in os.environ.items() if k.startswith(("PATH", "HOME", "PYTHON", "VIRTUAL", "LANG"))}
    return Client(StdioServerParameters(command=command[0], args=command[1:], env=env))


async def stdio_round_trips(db: str, n: int = 1000) -> tuple[float, float]:
    """p50 round trips of save_checkpoint and of the no-op tool. The two servers run side by side and
    the calls take turns, so the drift of a shared machine (a round trip is mostly process wake-ups)
    falls on both alike."""
    harness_cmd = [sys.executable, "-m", "mcp_harness", "serve", "--db", db]
    noop_cmd = [sys.executable, str(Path(__file__).with_name("noop_server.py"))]
    save = ("save_checkpoint", {"state": {"counter": 1}, "mode": "merge"})
    async with _stdio_client(noop_cmd) as noop, _stdio_client(harness_cmd) as ours:
        calls = [(noop, ("noop", {})), (ours, save)]
        times: list[list[float]] = [[], []]
        for i in range(n + 50):
            for j, (client, (tool, arguments)) in enumerate(calls):
                start = time.perf_counter()
                result = await client.call_tool(tool, arguments)
                if i >= 50:  # the first rounds warm up
                    times[j].append(time.perf_counter() - start)
                assert not result.is_error, result.content
    noop_p50, ours_p50 = (statistics.median(t) for t in times)
    return ours_p50, noop_p50


# -- report -----------------------------------------------------------------------------------------


def row(name: str, ours: float, theirs: float, ratio: float, target: str, ok: bool | None, unit: str) -> str:
    met = "-" if ok is None else "yes" if ok else "NO"
    return f"| {name} | {ours:,.4g} {unit} | {theirs:,.4g} {unit} | {ratio:.2f}x | {target} | {met} |"


async def main(args: argparse.Namespace) -> str:
    work = Path(tempfile.mkdtemp())
    db = lambda name: str(work / f"{name}.db")  # noqa: E731
    n = args.saves
    ours_w, lg_w, ours_b1, lg_b1 = await writes(db("o1"), db("l1"), one_key_state, n * WRITE_BLOCKS, WRITE_BLOCKS)
    ours_r, lg_r = await restores(db("o1"), db("l1"))
    _, _, ours_b2, lg_b2 = await writes(db("o2"), db("l2"), growing_state, n)
    ours_l, lg_l = await listings(db("o3"), db("l3"), 2000)
    small, big = await history_restores(db("o4"), db("o5"), args.history)
    save_p50, noop_p50 = await stdio_round_trips(db("o6"))
    message_bytes = len(json.dumps(MESSAGE)) + 8
    rows = [
        "| metric | mcp-harness | LangGraph / baseline | ratio | target | met |",
        "|---|---|---|---|---|---|",
        row(
            "write ops/s (one-key workload)",
            ours_w,
            lg_w,
            ours_w / lg_w,
            ">= 1.5x LangGraph",
            ours_w >= 1.5 * lg_w,
            "/s",
        ),
        row(
            "restore-latest p50 (ratio: times faster)",
            ours_r * 1000,
            lg_r * 1000,
            lg_r / ours_r,
            "(no target)",
            None,
            "ms",
        ),
        row(
            "list 2,000 history entries (ratio: times faster)",
            ours_l * 1000,
            lg_l * 1000,
            lg_l / ours_l,
            ">= 20x faster",
            lg_l >= 20 * ours_l,
            "ms",
        ),
        row(
            "bytes per checkpoint, one key of three changes",
            ours_b1,
            lg_b1,
            ours_b1 / lg_b1,
            "<= 0.25x LangGraph",
            ours_b1 <= 0.25 * lg_b1,
            "B",
        ),
        row(
            "bytes per checkpoint, list grows by one message",
            ours_b2,
            lg_b2,
            ours_b2 / lg_b2,
            f"<= 2x message ({2 * message_bytes} B)",
            ours_b2 <= 2 * message_bytes,
            "B",
        ),
        row(
            f"restore-latest p50 at {args.history:,} vs 1,000 checkpoints",
            big * 1000,
            small * 1000,
            big / small,
            "<= 1.2x",
            big <= 1.2 * small,
            "ms",
        ),
        row(
            "stdio round trip: save_checkpoint vs no-op tool",
            save_p50 * 1000,
            noop_p50 * 1000,
            save_p50 / noop_p50,
            "<= 1.25x",
            save_p50 <= 1.25 * noop_p50,
            "ms",
        ),
    ]
    versions = (
        f"mcp-harness {version('mcp-harness')}, langgraph-checkpoint-sqlite "
        f"{version('langgraph-checkpoint-sqlite')}, mcp {version('mcp')}, Python {platform.python_version()}, "
        f"SQLite {sqlite3.sqlite_version}, {os.cpu_count()} CPUs"
    )
    return "\n".join([f"{n} saves per workload; {versions}", "", *rows])


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--saves", type=int, default=300, help="saves per write workload")
    parser.add_argument("--history", type=int, default=100_000, help="checkpoints for the deep-history restore")
    parser.add_argument("--out", default=None, help="also write the table to this Markdown file")
    arguments = parser.parse_args()
    table = anyio.run(main, arguments)
    print(table)
    if arguments.out:
        Path(arguments.out).write_text(table + "\n")
