"""An agent's calls while console tabs hold a big board open with live refresh (issue 29): is an
agent's `record_progress` p99 with 10 tabs open within 2x of the same with no tab open?

The real server (`mcp-harness serve --transport http`, a process of its own) serves a SQLite file
holding the red team's board: 100 root tasks and 5,000 tasks that each wait on all of them (5,100
tasks, 500,000 dependencies, written by six `add_tasks` calls). An agent (the official MCP client over
streamable HTTP, with a bearer token) calls `record_progress` in that workspace, so every call is a
change every open tab hears about, after a random pause of 50-500 ms (so its calls land at every phase
of the refreshes they cause: the feed waits 250 ms for a burst to end, then the tabs re-fetch).

A tab does what the console's page does in a browser (read from the templates and checked against
Chromium's own requests): it loads the board page and its scripts and stylesheet, opens the change
stream (`GET /ui/events?w=...`, `Accept: text/event-stream`), and on every `change` event re-fetches
the page's two live parts with htmx's headers: the board's `#live` part (`GET /ui/board?w=...`,
`HX-Request`, `HX-Target: live`) and the "needs you" bar (`GET /ui/needs?w=...`, `HX-Target: needs`).
As htmx does, a part has at most one request in flight; events that arrive meanwhile make one more
request after it ("queue last"). The tabs run in a process of their own, each with its own
connections, signed in once (one person's session cookie). They are not 10 tabs of one Chromium: a
browser opens at most 6 connections to one host over HTTP/1.1 and each open console tab holds one for
its change stream, so a 7th tab on the same host waits for a free connection (checked with Chromium);
10 tabs are several people's browsers, or tabs behind an HTTP/2 proxy. Real browsers would also draw
the pages on the people's own machines, not on the server's 2 cores.

The calls are measured in blocks, taking turns: a block with no tab open, then a block with the tabs
open (opened before the block and settled: every tab has its page and its first refresh; closed
after), the order swapped every other round, so the drift of a shared machine falls on both alike.

    python tools/bench_tabs.py                      # 10 tabs, 300 calls each way
    python tools/bench_tabs.py --quick              # 1,100 tasks, 100 calls each way (while developing)
    python tools/bench_tabs.py --tabs 20 --calls 500
    python tools/bench_tabs.py --pause-max 2           # a calmer agent: fewer calls meet a refresh

`--loads N` measures another case: N people load the whole board page again and again (no live tabs)
while the agent works in another, small workspace; the target is 3x its time alone, p50 and p99.
`--busy K` keeps K more cores' worth of work running throughout (a busy machine), both blocks alike.

    python tools/bench_tabs.py --loads 3 --calls 150
    python tools/bench_tabs.py --loads 3 --calls 150 --busy 2
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import random
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import anyio
import httpx2

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from mcp_harness.arguments import AddTasksArgs
from mcp_harness.config import Settings  # noqa: E402
from mcp_harness.models import TaskSpec  # noqa: E402
from mcp_harness.service import Harness, Identity  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
WORKSPACE = "board"
OTHER = "elsewhere"  #: the workspace of the agent that `--loads` measures
LIMIT_RATIO = 2.0
LOADS_RATIO = 3.0  #: --loads: an agent's p50 and p99 in another workspace, with the loads against without
STATIC = ("console.css", "htmx.min.js", "htmx-ext-sse.js", "console.js")  #: what the board page loads
PAUSE = (0.05, 0.5)  #: seconds between an agent's calls, drawn uniformly (--pause-max changes the end)


# -- the database and the server ---------------------------------------------------------------------
async def build(db: str, roots: int, dependents: int) -> tuple[str, str, str]:
    """The red team's board, and a small workspace beside it; (an agent's token, a person's token, the
    token of an agent of the other workspace)."""
    async with Harness.open(Settings.from_env(db)) as h:
        me = Identity(WORKSPACE, "planner")
        keys = [f"root-{i:03}" for i in range(roots)]
        await h.tasks.add(me, AddTasksArgs(tasks=[TaskSpec(key=k, title=f"Foundation {k}") for k in keys]))
        for start in range(0, dependents, 1000):
            await h.tasks.add(
                me,
                AddTasksArgs(
                    tasks=[
                        TaskSpec(key=f"leaf-{i:04}", title=f"Feature {i} that needs every foundation", depends_on=keys)
                        for i in range(start, min(dependents, start + 1000))
                    ]
                ),
            )
        await h.tasks.add(Identity(OTHER, "planner"), AddTasksArgs(tasks=[TaskSpec(key="small", title="A small plan")]))
        tokens = (WORKSPACE, "agent-1"), (WORKSPACE, "olga", "operator"), (OTHER, "agent-2")
        return tuple([await h.tokens.create(*t) for t in tokens])  # type: ignore[return-value]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(db: str, log: Path) -> tuple[subprocess.Popen, str]:
    """`mcp-harness serve --transport http` on a free loopback port, running this checkout's code."""
    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [
        sys.executable,
        "-m",
        "mcp_harness",
        "serve",
        "--transport",
        "http",
        "--db",
        db,
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
    ]
    proc = subprocess.Popen(cmd, env=env, stdout=log.open("w"), stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited: {log.read_text()[-2000:]}")
        try:
            if httpx2.get(f"{url}/healthz", timeout=1).status_code == 200:
                return proc, url
        except httpx2.HTTPError:
            time.sleep(0.1)
    proc.terminate()
    raise RuntimeError("the server did not answer /healthz within 60 s")


# -- the tabs (a process of their own) -----------------------------------------------------------------
class Part:
    """One live part of a tab's page (`#live` or `#needs`), re-fetched as htmx does on `sse:change`:
    one request in flight at most; changes meanwhile make one more request after it."""

    def __init__(self, client: httpx2.AsyncClient, path: str, target: str, page_url: str, stats: dict) -> None:
        self.client, self.path, self.stats = client, path, stats
        self.headers = {"hx-request": "true", "hx-target": target, "hx-trigger": target, "hx-current-url": page_url}
        self.wanted = anyio.Event()
        self.done = 0  #: refreshes finished

    def change(self) -> None:
        self.wanted.set()

    async def run(self) -> None:
        while True:
            await self.wanted.wait()
            self.wanted = anyio.Event()
            started = time.perf_counter()
            got = await self.client.get(self.path, headers=self.headers)
            if got.status_code != 200:
                raise RuntimeError(f"{self.path}: {got.status_code} {got.text[:200]}")
            self.stats["ms"].append((time.perf_counter() - started) * 1000)
            self.stats["bytes"] += len(got.content)
            self.done += 1


async def tab(url: str, cookies: httpx2.Cookies, stats: dict, settled: list[int], index: int) -> None:
    """One console tab on the board: the page, its scripts, the change stream, the live parts."""
    page = f"/ui/board?w={WORKSPACE}"
    async with httpx2.AsyncClient(base_url=url, cookies=cookies, timeout=120) as client:
        got = await client.get(page)
        if got.status_code != 200:
            raise RuntimeError(f"the board page: {got.status_code} {got.text[:200]}")
        stats["pages"] += 1
        for name in STATIC:
            await client.get(f"/ui/static/{name}")
        parts = [
            Part(client, page, "live", url + page, stats),
            Part(client, f"/ui/needs?w={WORKSPACE}", "needs", url + page, stats),
        ]

        async def watch() -> None:
            while not all(part.done for part in parts):
                await anyio.sleep(0.02)
            settled[index] = 1

        async with anyio.create_task_group() as tg:
            for part in parts:
                tg.start_soon(part.run)
            tg.start_soon(watch)
            headers = {"accept": "text/event-stream", "cache-control": "no-cache"}
            async with client.stream("GET", f"/ui/events?w={WORKSPACE}", headers=headers) as stream:
                if stream.status_code != 200:
                    raise RuntimeError(f"the change stream: {stream.status_code}")
                event = ""
                async for line in stream.aiter_lines():
                    if line.startswith("event:"):
                        event = line.split(":", 1)[1].strip()
                    elif line == "" and event:  # the end of an event: htmx's sse extension dispatches it
                        if event == "change":
                            stats["events"] += 1
                            for part in parts:
                                part.change()
                        event = ""


async def sign_in(url: str, token: str) -> httpx2.Cookies:
    """A console session's cookies, signed in with `token` as a person's browser is."""
    async with httpx2.AsyncClient(base_url=url, follow_redirects=False) as browser:
        signed = await browser.post("/ui/login", data={"token": token}, headers={"origin": url})
        if signed.status_code != 303:
            raise RuntimeError(f"sign-in: {signed.status_code} {signed.text[:200]}")
        return browser.cookies


def tabs_process(url: str, token: str, commands: Any, replies: Any) -> None:
    """Opens and closes `n` tabs on command: ("open", n), ("close",), ("quit",)."""

    async def main() -> None:
        cookies = await sign_in(url, token)
        while True:
            command = await anyio.to_thread.run_sync(commands.get)
            if command[0] == "quit":
                return
            n = command[1]
            stats: dict = {"pages": 0, "events": 0, "bytes": 0, "ms": []}
            settled = [0] * n
            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(tab, url, cookies, stats, settled, i)
                deadline = time.monotonic() + 300
                while not all(settled) and time.monotonic() < deadline:
                    await anyio.sleep(0.05)
                await anyio.sleep(0.5)  # the last refreshes' answers are in
                opened = dict(stats, ms=list(stats["ms"]), bytes=stats["bytes"])
                replies.put(("opened", all(settled)))
                await anyio.to_thread.run_sync(commands.get)  # ("close",)
                tg.cancel_scope.cancel()
            after = {k: v for k, v in stats.items()}
            after["ms"] = stats["ms"][len(opened["ms"]) :]  # the refreshes while the agent called
            after["bytes"] = stats["bytes"] - opened["bytes"]
            after["events"] = stats["events"] - opened["events"]
            replies.put(("closed", after))

    anyio.run(main)


# -- whole board pages loaded over and over (--loads) ------------------------------------------------------
async def loader(url: str, cookies: httpx2.Cookies, stats: dict, loaded: list[int], index: int) -> None:
    """A person loading the board page again and again (a refresh as soon as it came), the page alone."""
    async with httpx2.AsyncClient(base_url=url, cookies=cookies, timeout=120) as client:
        while True:
            started = time.perf_counter()
            got = await client.get(f"/ui/board?w={WORKSPACE}")
            if got.status_code != 200:
                raise RuntimeError(f"the board page: {got.status_code} {got.text[:200]}")
            stats["ms"].append((time.perf_counter() - started) * 1000)
            stats["bytes"] += len(got.content)
            loaded[index] = 1


def loads_process(url: str, token: str, commands: Any, replies: Any) -> None:
    """Starts and stops `n` loaders on command: ("open", n), ("close",), ("quit",)."""

    async def main() -> None:
        cookies = await sign_in(url, token)
        while True:
            command = await anyio.to_thread.run_sync(commands.get)
            if command[0] == "quit":
                return
            n = command[1]
            stats: dict = {"pages": 0, "events": 0, "bytes": 0, "ms": []}
            loaded = [0] * n
            async with anyio.create_task_group() as tg:
                for i in range(n):
                    tg.start_soon(loader, url, cookies, stats, loaded, i)
                while not all(loaded):
                    await anyio.sleep(0.05)
                replies.put(("opened", True))
                await anyio.to_thread.run_sync(commands.get)  # ("close",)
                tg.cancel_scope.cancel()
            replies.put(("closed", {**stats, "events": 0}))

    anyio.run(main)


def burn(stop: Any) -> None:
    """A busy machine: one core's worth of work until told to stop."""
    n = 0
    while not stop.is_set():
        for _ in range(100_000):
            n += 1


# -- the agent -------------------------------------------------------------------------------------------
async def agent_calls(
    url: str, token: str, rounds: int, block: int, tabs: int, pause: tuple[float, float], commands: Any, replies: Any
) -> dict:
    """The agent's `record_progress` times (ms) with no tab open and with `tabs` open, and the tabs' work."""
    from mcp import Client
    from mcp.client.streamable_http import streamable_http_client

    times: dict[str, list[float]] = {"none": [], "tabs": []}
    served: dict[str, Any] = {"ms": [], "bytes": 0, "events": 0, "seconds": 0.0}
    headers = {"authorization": f"Bearer {token}"}
    async with (
        httpx2.AsyncClient(headers=headers, timeout=120) as http,
        Client(streamable_http_client(f"{url}/mcp", http_client=http), read_timeout_seconds=120) as client,
    ):
        n = 0

        async def record(side: str | None) -> None:
            nonlocal n
            n += 1
            await anyio.sleep(random.uniform(*pause))
            started = time.perf_counter()
            result = await client.call_tool(
                "record_progress", {"summary": f"step {n}: tried it, it works", "status": "in_progress"}
            )
            took = (time.perf_counter() - started) * 1000
            if result.is_error:
                raise RuntimeError(f"record_progress failed: {result.content}")
            if side is not None:
                times[side].append(took)

        for _ in range(10):  # warm-up: connections, the server's caches
            await record(None)
        for r in range(rounds):
            for side in ("none", "tabs") if r % 2 == 0 else ("tabs", "none"):
                if side == "tabs":
                    commands.put(("open", tabs))
                    kind, ok = await anyio.to_thread.run_sync(replies.get, True, 600)
                    if not ok:
                        raise RuntimeError("the tabs did not all load and refresh within 300 s")
                started = time.monotonic()
                for _ in range(block):
                    await record(side)
                if side == "tabs":
                    served["seconds"] += time.monotonic() - started
                    commands.put(("close",))
                    kind, after = await anyio.to_thread.run_sync(replies.get, True, 600)
                    served["ms"] += after["ms"]
                    served["bytes"] += after["bytes"]
                    served["events"] += after["events"]
                    await anyio.sleep(0.5)  # the server has let the streams go
                print(f"  round {r + 1}/{rounds}: {side}, p50 {statistics.median(times[side]):.1f} ms", flush=True)
    return {"times": times, "served": served}


def p(values: list[float], q: int) -> float:
    return statistics.quantiles(values, n=100, method="inclusive")[q - 1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tabs", type=int, default=10, help="tabs open on the board")
    parser.add_argument("--calls", type=int, default=300, help="timed record_progress calls each way")
    parser.add_argument("--block", type=int, default=30, help="calls per block (tabs open or not)")
    parser.add_argument("--pause-max", type=float, default=PAUSE[1], help="longest pause between calls, seconds")
    parser.add_argument("--quick", action="store_true", help="a board of 1,100 tasks, 100 calls each way")
    parser.add_argument(
        "--loads",
        type=int,
        default=0,
        help="instead of live tabs: this many people loading the whole board page over and over, "
        "while the agent works in another workspace",
    )
    parser.add_argument("--busy", type=int, default=0, help="processes keeping a core each busy throughout")
    args = parser.parse_args()
    limit = LOADS_RATIO if args.loads else LIMIT_RATIO
    roots, dependents = (100, 1000) if args.quick else (100, 5000)
    calls = 100 if args.quick else args.calls
    rounds = max(1, calls // args.block)
    with tempfile.TemporaryDirectory() as tmp:
        db = str(Path(tmp) / "board.db")
        started = time.perf_counter()
        agent_token, person_token, other_token = anyio.run(build, db, roots, dependents)
        print(f"board of {roots + dependents:,} tasks built in {time.perf_counter() - started:.0f} s", flush=True)
        server, url = start_server(db, Path(tmp) / "server.log")
        ctx = mp.get_context("spawn")
        commands, replies = ctx.Queue(), ctx.Queue()
        target, token, n = (
            (loads_process, other_token, args.loads) if args.loads else (tabs_process, agent_token, args.tabs)
        )
        tabs = ctx.Process(target=target, args=(url, person_token, commands, replies), daemon=True)
        tabs.start()
        stop = ctx.Event()
        burners = [ctx.Process(target=burn, args=(stop,), daemon=True) for _ in range(args.busy)]
        for burner in burners:
            burner.start()
        try:
            pause = (PAUSE[0], args.pause_max)
            out = anyio.run(agent_calls, url, token, rounds, args.block, n, pause, commands, replies)
        finally:
            stop.set()
            commands.put(("quit",))
            tabs.join(timeout=30)
            for burner in burners:
                burner.join(timeout=10)
            server.terminate()
            server.wait(timeout=30)
    times, served = out["times"], out["served"]
    print()
    print(
        f"{len(times['none'])} record_progress calls each way over HTTP (official MCP client, bearer token), "
        f"{rounds} blocks of {args.block} taking turns; board of {roots + dependents:,} tasks ({roots} roots x "
        f"{dependents:,} dependents) on SQLite; pauses of {PAUSE[0] * 1000:.0f}-{args.pause_max * 1000:.0f} ms "
        f"between calls; Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load {os.getloadavg()[0]:.1f}"
    )
    print()
    if args.loads:
        print(
            f"the agent works in workspace {OTHER!r}; {args.loads} people load the whole board page of "
            f"{WORKSPACE!r} over and over during the loaded blocks; {args.busy} processes keep a core busy each"
        )
        labels = (("none", "alone"), ("tabs", f"{args.loads} board loads at once"))
    else:
        labels = (("none", "no tab open"), ("tabs", f"{args.tabs} tabs open, live"))
    print("| record_progress | p50 | p90 | p99 | max |")
    print("|---|---|---|---|---|")
    for side, label in labels:
        v = times[side]
        print(f"| {label} | {statistics.median(v):.1f} ms | {p(v, 90):.1f} ms | {p(v, 99):.1f} ms | {max(v):.1f} ms |")
    ratio = p(times["tabs"], 99) / p(times["none"], 99)
    median = statistics.median(times["tabs"]) / statistics.median(times["none"])
    ms = served["ms"]
    print()
    if args.loads:
        print(
            f"{len(ms)} board pages loaded while the agent called ({len(ms) / served['seconds']:.1f}/s, "
            f"{served['bytes'] / max(1, len(ms)) / 1024:.0f} KB each, p50 {statistics.median(ms):.0f} ms, "
            f"p99 {p(ms, 99):.0f} ms)"
        )
        met = max(ratio, median) <= limit
        print(
            f"with the loads / alone: p50 {median:.2f}x, p99 {ratio:.2f}x ({'met' if met else 'NOT met'}: "
            f"target <= {limit:.0f}x)"
        )
        sys.exit(0 if met else 1)
    if ms:
        print(
            f"while the agent called with tabs open: {served['events']} change events reached the tabs, "
            f"{len(ms)} live parts were re-fetched ({len(ms) / served['seconds']:.1f}/s, "
            f"{served['bytes'] / len(ms) / 1024:.0f} KB each on average, p50 {statistics.median(ms):.0f} ms, "
            f"p99 {p(ms, 99):.0f} ms)"
        )
    print(
        f"p99 with {args.tabs} tabs / with none: {ratio:.2f}x ({'met' if ratio <= limit else 'NOT met'}: "
        f"target <= {limit:.0f}x)"
    )
    sys.exit(0 if ratio <= limit else 1)


if __name__ == "__main__":
    main()
