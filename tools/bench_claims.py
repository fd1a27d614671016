"""Claim+complete throughput of `mcp-harness serve` over stdio, with several server processes on one
database, optionally side by side with an older commit built in its own virtualenv.

Each server process is spawned as a client spawns it (`mcp-harness serve --db ... --agent wN` on
stdio) and driven by a thin client: raw JSON-RPC lines over its pipes, `--workers` requests in flight
spread over the processes, each lane looping claim_task -> update_task(complete) until the list is
drained (the official MCP client would cost about a third of the CPU by itself). The clock starts once
every server has answered a first call (its database open) and stops when the last lane finished.
The run fails on any duplicate completion, missed task, or "database is locked" error.

With `--baseline REF` the commit REF is built once into a virtualenv of its own (`git archive` of REF
into a folder under /tmp keyed by the commit, `python -m venv`, `pip install` of that tree) and the two
builds take turns (`--rounds` each, the order flipped every round) on databases of their own, so that
their ratios are measured in the same sitting: with one process (one request in flight) the turns are
pair by pair, one server of each build open at once, and the p50 of a claim and of a complete (as the
client sees them) are reported too; with more, both builds run at once, each on its own database, and
the clock stops when the first has drained its tasks (`--whole-runs`: whole runs in turns instead).
On PostgreSQL the asyncpg floor (`tools/pg_claim_floor.py`: the harness's statements on bare asyncpg)
runs in the same sitting.

    python tools/bench_claims.py                                   # SQLite file, 1, 4 and 8 processes
    python tools/bench_claims.py --baseline 7099384 --rounds 3     # and the old build, taking turns
    python tools/bench_claims.py --db postgresql+asyncpg://postgres@127.0.0.1:5432/bench_claims \
        --processes 2 --workers 32 --baseline 7099384              # 2 processes x 16 in flight, the floor
    python tools/bench_claims.py --processes 1 --profile /tmp/prof # where a server's time goes (cProfile)
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: baselines are built here, one folder per commit (its source and its virtualenv)
BUILDS = Path(tempfile.gettempdir()) / "mcp-harness-baselines"
#: tasks added per add_tasks call while seeding
SEED_BATCH = 500
#: targets the report checks (ratios against the baseline in the same run)
TARGET_THROUGHPUT = 1.3
TARGET_P50 = 0.8
TARGET_FLOOR = 1.5


@dataclass
class Build:
    """A build of the harness to run: its label, the Python that runs `-m mcp_harness`, its folder."""

    label: str
    python: str
    cwd: str
    #: a folder for the servers' cProfile profiles (`tools/profile_serve.py`; the seeder is not profiled)
    profile: str | None = None


def git(*args: str) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], check=True, capture_output=True, text=True).stdout.strip()


def build_baseline(ref: str) -> Build:
    """The commit `ref` installed into a virtualenv of its own, made once and kept under /tmp."""
    sha = git("rev-parse", "--verify", f"{ref}^{{commit}}")
    home = BUILDS / sha
    venv = home / "venv"
    python = venv / "bin" / "python"
    if not (home / "ready").exists():
        if home.exists():
            shutil.rmtree(home)
        src = home / "src"
        src.mkdir(parents=True)
        print(f"building {sha[:7]} in {home} (once) ...", file=sys.stderr, flush=True)
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", "--format=tar", sha], check=True, capture_output=True
        ).stdout
        subprocess.run(["tar", "-x", "-C", str(src)], input=archive, check=True)
        subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
        subprocess.run([str(python), "-m", "pip", "install", "-q", str(src)], check=True)
        (home / "ready").write_text(sha + "\n")
    return Build(sha[:7], str(python), str(home))


def this_build() -> Build:
    return Build("this", sys.executable, str(ROOT))


# -- the thin client -------------------------------------------------------------------------------


class Server:
    """One `mcp-harness serve` process on stdio, spoken to in raw JSON-RPC lines."""

    def __init__(self, proc: asyncio.subprocess.Process) -> None:
        self.proc = proc
        self.next_id = 0
        self.waiting: dict[int, asyncio.Future[dict]] = {}
        self.reader = asyncio.create_task(self._read())

    @classmethod
    async def spawn(cls, build: Build, db: str, workspace: str, agent: str) -> Server:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("MCP_HARNESS_", "CLAUDE_CODE_"))}
        run = ["-m", "mcp_harness"]
        if build.profile and agent != "seeder":
            run = [str(ROOT / "tools" / "profile_serve.py"), build.profile]
        command = [build.python, *run, "serve", "--db", db, "--workspace", workspace, "--agent", agent]
        proc = await asyncio.create_subprocess_exec(
            *command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=build.cwd,
            limit=2**24,
        )
        server = cls(proc)
        await server.request(
            "initialize",
            {
                "protocolVersion": "2025-06-18",
                "capabilities": {},
                "clientInfo": {"name": "bench_claims", "version": "0"},
            },
        )
        server.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return server

    async def _read(self) -> None:
        assert self.proc.stdout is not None
        while line := await self.proc.stdout.readline():
            message = json.loads(line)
            future = self.waiting.pop(message.get("id"), None)  # type: ignore[arg-type]
            if future is not None and not future.done():
                future.set_result(message)
        for future in self.waiting.values():
            if not future.done():
                future.set_exception(RuntimeError("the server exited"))

    def send(self, message: dict) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps(message, separators=(",", ":")).encode() + b"\n")

    async def request(self, method: str, params: dict) -> dict:
        self.next_id += 1
        future: asyncio.Future[dict] = asyncio.get_running_loop().create_future()
        self.waiting[self.next_id] = future
        self.send({"jsonrpc": "2.0", "id": self.next_id, "method": method, "params": params})
        answer = await future
        if "error" in answer:
            raise RuntimeError(f"{method}: {answer['error']}")
        return answer["result"]

    async def call(self, tool: str, **arguments: Any) -> tuple[bool, Any]:
        """(is_error, the tool's structured result or its error text)."""
        result = await self.request("tools/call", {"name": tool, "arguments": arguments})
        text = result["content"][0]["text"] if result.get("content") else ""
        if result.get("isError"):
            return True, text
        return False, result.get("structuredContent") or json.loads(text)

    async def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), 30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        await self.reader


@dataclass
class Tally:
    done: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    claim_ms: list[float] = field(default_factory=list)
    complete_ms: list[float] = field(default_factory=list)


async def lane(server: Server, tally: Tally, stop: asyncio.Event | None = None) -> None:
    while stop is None or not stop.is_set():
        t0 = time.perf_counter()
        failed, got = await server.call("claim_task", lease_seconds=300)
        t1 = time.perf_counter()
        if failed:
            tally.errors.append(str(got))
            continue
        if got.get("task") is None:
            if got.get("reason") in ("all_done", "none_pending"):
                return
            await asyncio.sleep(0.001)  # the last tasks are held by other lanes
            continue
        tally.claim_ms.append((t1 - t0) * 1000)
        key = got["task"]["key"]
        failed, answer = await server.call(
            "update_task", task_key=key, action="complete", lease_token=got["lease"]["token"], verification="bench"
        )
        tally.complete_ms.append((time.perf_counter() - t1) * 1000)
        if failed:
            tally.errors.append(str(answer))
        else:
            tally.done.append(key)


async def seed(build: Build, db: str, workspace: str, tasks: int) -> None:
    server = await Server.spawn(build, db, workspace, "seeder")
    try:
        for start in range(0, tasks, SEED_BATCH):
            specs = [{"key": f"t{i}", "title": f"task {i}"} for i in range(start, min(tasks, start + SEED_BATCH))]
            failed, answer = await server.call("add_tasks", tasks=specs)
            if failed:
                raise RuntimeError(f"add_tasks: {answer}")
    finally:
        await server.close()


async def one_run(build: Build, db: str, processes: int, in_flight: int, tasks: int) -> dict:
    """Seed a fresh workspace, start `processes` servers, drain it with `in_flight` lanes each."""
    workspace = f"bench-{build.label}-{processes}p-{time.time_ns() % 10**12}"
    await seed(build, db, workspace, tasks)
    servers = await asyncio.gather(*(Server.spawn(build, db, workspace, f"w{i}") for i in range(processes)))
    try:
        for server in servers:  # each opens its database (and warms its statements) before the clock
            failed, answer = await server.call("list_tasks", limit=1)
            if failed:
                raise RuntimeError(f"list_tasks: {answer}")
        tally = Tally()
        cpu0 = os.times()
        start = time.perf_counter()
        await asyncio.gather(*(lane(s, tally) for s in servers for _ in range(in_flight)))
        elapsed = time.perf_counter() - start
        cpu1 = os.times()
    finally:
        await asyncio.gather(*(s.close() for s in servers))
    dupes = [k for k, c in Counter(tally.done).items() if c > 1]
    return {
        "build": build.label,
        "processes": processes,
        "in_flight": in_flight,
        "tasks": tasks,
        "completed": len(tally.done),
        "duplicates": len(dupes),
        "errors": len(tally.errors),
        "locked_errors": sum("locked" in e for e in tally.errors),
        "seconds": round(elapsed, 3),
        "per_second": round(len(tally.done) / elapsed, 1),
        "client_cpu_share": round(
            (cpu1.user + cpu1.system - cpu0.user - cpu0.system) / elapsed / (os.cpu_count() or 1), 3
        ),
        "claim_p50_ms": round(statistics.median(tally.claim_ms), 3) if tally.claim_ms else None,
        "complete_p50_ms": round(statistics.median(tally.complete_ms), 3) if tally.complete_ms else None,
    }


async def prepared(build: Build, db: str, processes: int, tasks: int) -> list[Server]:
    """A fresh workspace of `tasks` tasks and `processes` servers on it, each with its database open."""
    workspace = f"bench-{build.label}-{processes}p-{time.time_ns() % 10**12}"
    await seed(build, db, workspace, tasks)
    servers = await asyncio.gather(*(Server.spawn(build, db, workspace, f"w{i}") for i in range(processes)))
    for server in servers:
        failed, answer = await server.call("list_tasks", limit=1)
        if failed:
            raise RuntimeError(f"list_tasks: {answer}")
    return list(servers)


async def together(builds: list[Build], dbs: list[str], processes: int, in_flight: int, tasks: int) -> list[dict]:
    """Both builds at once, each with its `processes` servers on its own database, so that both share
    the same moments of a shared machine: the clock stops when the first has drained its tasks, and
    each build's rate is what it completed by then (the other's rest is left undone: `partial`)."""
    fleets = [await prepared(b, db, processes, tasks) for b, db in zip(builds, dbs, strict=True)]
    tallies = [Tally() for _ in builds]
    stop = asyncio.Event()
    counted: list[int] = []
    start = time.perf_counter()
    elapsed = 0.0

    async def drive(servers: list[Server], tally: Tally) -> None:
        nonlocal elapsed
        await asyncio.gather(*(lane(s, tally, stop) for s in servers for _ in range(in_flight)))
        if not stop.is_set():
            elapsed = time.perf_counter() - start
            counted.extend(len(t.done) for t in tallies)
            stop.set()

    try:
        await asyncio.gather(*(drive(f, t) for f, t in zip(fleets, tallies, strict=True)))
    finally:
        await asyncio.gather(*(s.close() for f in fleets for s in f))
    rows = []
    for build, tally, done in zip(builds, tallies, counted, strict=True):
        rows.append(
            {
                "build": build.label,
                "processes": processes,
                "in_flight": in_flight,
                "tasks": tasks,
                "completed": len(tally.done),
                "partial": len(tally.done) < tasks,
                "duplicates": len(tally.done) - len(set(tally.done)),
                "errors": len(tally.errors),
                "locked_errors": sum("locked" in e for e in tally.errors),
                "seconds": round(elapsed, 3),
                "per_second": round(done / elapsed, 1),
                "client_cpu_share": 0.0,
                "claim_p50_ms": round(statistics.median(tally.claim_ms), 3) if tally.claim_ms else None,
                "complete_p50_ms": round(statistics.median(tally.complete_ms), 3) if tally.complete_ms else None,
            }
        )
    return rows


async def interleaved(builds: list[Build], dbs: list[str], tasks: int) -> list[dict]:
    """One process of each build, driven pair by pair in turns (one claim+complete on one, then on the
    other; the order flipped every pair), so that both see the same moments of a shared machine. Each
    build's rate is its pairs over the time its own pairs took."""
    servers = []
    workspace = f"bench-turns-{time.time_ns() % 10**12}"
    for build, db in zip(builds, dbs, strict=True):
        await seed(build, db, workspace, tasks)
        server = await Server.spawn(build, db, workspace, "w0")
        failed, answer = await server.call("list_tasks", limit=1)
        if failed:
            raise RuntimeError(f"list_tasks: {answer}")
        servers.append(server)
    tallies = [Tally() for _ in builds]
    spent = [0.0 for _ in builds]
    try:
        for i in range(tasks):
            order = range(len(servers)) if i % 2 == 0 else reversed(range(len(servers)))
            for j in order:
                server, tally = servers[j], tallies[j]
                t0 = time.perf_counter()
                failed, got = await server.call("claim_task", lease_seconds=300)
                t1 = time.perf_counter()
                if failed or got.get("task") is None:
                    tally.errors.append(str(got))
                    continue
                tally.claim_ms.append((t1 - t0) * 1000)
                args = {"task_key": got["task"]["key"], "action": "complete", "lease_token": got["lease"]["token"]}
                failed, answer = await server.call("update_task", **args, verification="bench")
                t2 = time.perf_counter()
                tally.complete_ms.append((t2 - t1) * 1000)
                spent[j] += t2 - t0
                if failed:
                    tally.errors.append(str(answer))
                else:
                    tally.done.append(got["task"]["key"])
    finally:
        await asyncio.gather(*(s.close() for s in servers))
    rows = []
    for build, tally, seconds in zip(builds, tallies, spent, strict=True):
        rows.append(
            {
                "build": build.label,
                "processes": 1,
                "in_flight": 1,
                "tasks": tasks,
                "completed": len(tally.done),
                "duplicates": len(tally.done) - len(set(tally.done)),
                "errors": len(tally.errors),
                "locked_errors": sum("locked" in e for e in tally.errors),
                "seconds": round(seconds, 3),
                "per_second": round(len(tally.done) / seconds, 1) if seconds else 0.0,
                "client_cpu_share": 0.0,
                "claim_p50_ms": round(statistics.median(tally.claim_ms), 3) if tally.claim_ms else None,
                "complete_p50_ms": round(statistics.median(tally.complete_ms), 3) if tally.complete_ms else None,
            }
        )
    return rows


# -- databases -------------------------------------------------------------------------------------


def is_postgres(db: str) -> bool:
    return db.startswith("postgresql")


def pg_database(url: str, suffix: str) -> str:
    """A database of its own beside `url`'s for a build (schemas differ between commits), made if missing."""
    if not suffix:
        target = url
    else:
        target = re.sub(r"/([^/?]+)(\?|$)", lambda m: f"/{m.group(1)}_{suffix}{m.group(2)}", url, count=1)
    import asyncpg

    base = url.replace("postgresql+asyncpg://", "postgresql://")
    name = target.rsplit("/", 1)[1].split("?")[0]

    async def create() -> None:
        conn = await asyncpg.connect(re.sub(r"/[^/?]+(\?|$)", r"/postgres\1", base, count=1))
        try:
            if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", name):
                await conn.execute(f'CREATE DATABASE "{name}"')
        finally:
            await conn.close()

    asyncio.run(create())
    return target


def database_for(args: argparse.Namespace, build: Build, folder: str, turn: str) -> str:
    if args.db and is_postgres(args.db):
        return args.pg[build.label]
    if args.db:
        return args.db if build.label == "this" else f"{args.db}.{build.label}"
    return str(Path(folder) / f"{build.label}-{turn}.db")  # a fresh SQLite file per run


def floor(db: str, processes: int, workers: int, tasks: int) -> float | None:
    """tools/pg_claim_floor.py in this sitting: claim+complete/s on bare asyncpg."""
    out = subprocess.run(
        [
            sys.executable,
            str(ROOT / "tools" / "pg_claim_floor.py"),
            "--db",
            db,
            "--processes",
            str(processes),
            "--workers",
            str(workers),
            "--tasks",
            str(tasks),
        ],
        capture_output=True,
        text=True,
    )
    found = re.search(r": ([\d,]+) claim\+complete/s", out.stdout)
    if out.returncode or not found:
        print(f"floor failed: {out.stdout}{out.stderr}", file=sys.stderr)
        return None
    return float(found.group(1).replace(",", ""))


# -- the report ------------------------------------------------------------------------------------


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


def ratio(a: float | None, b: float | None) -> float | None:
    return round(a / b, 2) if a and b else None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--db", default=None, help="database URL or SQLite path (default: a new SQLite file per run)")
    parser.add_argument("--processes", type=int, nargs="+", default=None, help="server process counts (default 1 4 8)")
    parser.add_argument(
        "--workers",
        type=int,
        default=None,
        help="requests in flight in all, over the processes (default one per process)",
    )
    parser.add_argument("--tasks", type=int, default=2000, help="tasks drained per run")
    parser.add_argument("--baseline", default=None, metavar="REF", help="an older commit to run side by side")
    parser.add_argument(
        "--rounds", type=int, default=None, help="runs per build and process count (default 3 with --baseline, else 1)"
    )
    parser.add_argument("--no-floor", action="store_true", help="PostgreSQL: skip the asyncpg floor")
    parser.add_argument(
        "--whole-runs",
        action="store_true",
        help="with --baseline: whole runs in turns (not pair by pair, nor both builds at once)",
    )
    parser.add_argument("--json", action="store_true", help="print the runs and the summary as JSON")
    parser.add_argument(
        "--profile",
        metavar="DIR",
        help="run the servers under cProfile: DIR/<build>/<pid>.prof (tools/profile_serve.py)",
    )
    args = parser.parse_args()
    builds = [this_build()]
    if args.baseline:
        builds.append(build_baseline(args.baseline))
    if args.profile:
        for build in builds:
            build.profile = str(Path(args.profile) / build.label)
    rounds = args.rounds or (3 if args.baseline else 1)
    counts = args.processes or ([2] if args.db and is_postgres(args.db) else [1, 4, 8])
    postgres = bool(args.db and is_postgres(args.db))
    if postgres:
        args.pg = {b.label: pg_database(args.db, "" if b.label == "this" else f"base_{b.label}") for b in builds}
    folder = tempfile.mkdtemp(prefix="bench_claims-")
    runs: list[dict] = []
    summary: list[dict] = []
    for n in counts:
        in_flight = max(1, (args.workers or n) // n)
        started_load = load()
        mine: dict[str, list[dict]] = {b.label: [] for b in builds}
        floors: list[float] = []
        for r in range(rounds):
            order = builds if r % 2 == 0 else builds[::-1]
            if n == 1 and in_flight == 1 and len(builds) > 1 and not args.whole_runs:
                dbs = [database_for(args, b, folder, f"{n}p-{r}") for b in builds]
                got = asyncio.run(interleaved(builds, dbs, args.tasks))
            elif len(builds) > 1 and not args.whole_runs:
                dbs = [database_for(args, b, folder, f"{n}p-{r}") for b in order]
                got = asyncio.run(together(list(order), dbs, n, in_flight, args.tasks))
            else:
                got = [
                    asyncio.run(one_run(b, database_for(args, b, folder, f"{n}p-{r}"), n, in_flight, args.tasks))
                    for b in order
                ]
            for row in got:
                build = next(b for b in builds if b.label == row["build"])
                row["round"] = r
                runs.append(row)
                mine[build.label].append(row)
                if not args.json:
                    print(
                        f"  {build.label:>8} {n} x {in_flight}: {row['per_second']:8.1f}/s ({row['completed']}/"
                        f"{row['tasks']} in {row['seconds']} s; claim p50 {row['claim_p50_ms']} ms, complete p50 "
                        f"{row['complete_p50_ms']} ms; client {row['client_cpu_share']:.0%} of the CPU; dup "
                        f"{row['duplicates']}, errors {row['errors']})",
                        flush=True,
                    )
            if postgres and not args.no_floor:
                got = floor(args.pg["this"], n, n * in_flight, args.tasks)
                if got:
                    floors.append(got)
                    if not args.json:
                        print(f"  {'floor':>8} {n} x {in_flight}: {got:8.1f}/s", flush=True)
        entry: dict[str, Any] = {"processes": n, "in_flight": in_flight, "load": f"{started_load} -> {load()}"}
        for label, rows in mine.items():
            entry[label] = {
                "per_second": statistics.median(x["per_second"] for x in rows),
                "claim_p50_ms": statistics.median(x["claim_p50_ms"] for x in rows if x["claim_p50_ms"]),
                "complete_p50_ms": statistics.median(x["complete_p50_ms"] for x in rows if x["complete_p50_ms"]),
            }
        if floors:
            entry["floor_per_second"] = statistics.median(floors)
            entry["floor_ratio"] = ratio(entry["floor_per_second"], entry["this"]["per_second"])
        if args.baseline:
            base = entry[builds[1].label]
            this = entry["this"]
            entry["throughput_ratio"] = ratio(this["per_second"], base["per_second"])
            # each round's ratio too: the two builds ran back to back, so a round's ratio shares its load
            entry["round_ratios"] = [
                ratio(a["per_second"], b["per_second"])
                for a, b in zip(mine["this"], mine[builds[1].label], strict=True)
            ]
            entry["claim_p50_ratio"] = ratio(this["claim_p50_ms"], base["claim_p50_ms"])
            entry["complete_p50_ratio"] = ratio(this["complete_p50_ms"], base["complete_p50_ms"])
        summary.append(entry)
        if not args.json:
            print(describe(entry, builds), flush=True)
    bad = [
        r
        for r in runs
        if r["duplicates"] or (r["completed"] != r["tasks"] and not r.get("partial")) or r["locked_errors"]
    ]
    if args.json:
        print(json.dumps({"db": (args.db or "sqlite files").split("@")[-1], "runs": runs, "summary": summary}))
    shutil.rmtree(folder, ignore_errors=True)
    for r in bad:
        print(
            f"FAILED: {r['build']} {r['processes']} processes: {r['completed']}/{r['tasks']} completed, "
            f"{r['duplicates']} duplicates, {r['locked_errors']} locked errors",
            file=sys.stderr,
        )
    return 1 if bad else 0


def describe(entry: dict, builds: list[Build]) -> str:
    this = entry["this"]
    line = f"{entry['processes']} processes x {entry['in_flight']}: this {this['per_second']:.1f}/s"
    if len(builds) > 1:
        base = entry[builds[1].label]
        line += (
            f", {builds[1].label} {base['per_second']:.1f}/s: {entry['throughput_ratio']}x "
            f"(rounds {entry['round_ratios']}; target >= {TARGET_THROUGHPUT}x)"
        )
        if entry["processes"] == 1 and entry["in_flight"] == 1:
            line += (
                f"; p50 claim {this['claim_p50_ms']} vs {base['claim_p50_ms']} ms: {entry['claim_p50_ratio']}x, "
                f"complete {this['complete_p50_ms']} vs {base['complete_p50_ms']} ms: {entry['complete_p50_ratio']}x "
                f"(target <= {TARGET_P50}x)"
            )
    if "floor_per_second" in entry:
        line += (
            f"; asyncpg floor {entry['floor_per_second']:.1f}/s: {entry['floor_ratio']}x (target <= {TARGET_FLOOR}x)"
        )
    return line + f" [{entry['load']}]"


if __name__ == "__main__":
    raise SystemExit(main())
