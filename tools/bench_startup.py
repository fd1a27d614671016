"""Start-up and exit of `mcp-harness serve` (stdio) against a no-op MCP server on the same SDK.

    python tools/bench_startup.py [--rounds 15]

Clients such as Claude Code and Claude Desktop start the server for every session, so what a person
waits for is the time from spawning the process to the answer of `tools/list`, then to the answer of
the session's first tool call (an agent's first `restore_state`), and the time the process takes to
exit once the client closes its stdin. Both servers are spawned in turns in one run (ours as
installed: the `mcp-harness` console script beside this Python, on a SQLite file made before the
clock starts, as every session after a project's first finds it; the no-op as
`python tools/noop_server.py`), speaking raw JSON-RPC over pipes, so the client's own cost is not in
the figures. Each spawn gets a fresh `CLAUDE_CODE_SESSION_ID`, as Claude Code gives a session's
servers: ours then acts for that session and records its identity for the session's hooks. Each
round spawns each server twice:

- a session: initialize, initialized, tools/list, then one tool call (`restore_state` for ours, the
  no-op tool for the other), then stdin closed;
- a probe: initialize, initialized, tools/list, then stdin closed at once (a client checking its
  servers), whose exit is what a server does with a database it started opening and nobody needs.

Medians are reported with their ratios and targets: spawn to tools/list <= 1.3x the no-op's; spawn to
the first call's answer <= 1.3x the no-op's spawn to tools/list (what it costs to open the database
shows here, not before the handshake); the exit after a call and after a bare tools/list <= 1.5x the
no-op's. Exits 1 when a target is missed.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
#: phase -> (what it measures, target ratio, the no-op's phase it is compared with)
PHASES = {
    "start": ("spawn to tools/list answer", 1.3, "start"),
    "first_call": ("spawn to the first call's answer (ours: restore_state)", 1.3, "start"),
    "exit": ("stdin closed to exit, after a call", 1.5, "exit"),
    "bare_exit": ("stdin closed to exit, after a bare tools/list", 1.5, "bare_exit"),
}

#: after tools/list, a session's first call: ours an agent's restore_state (it opens the database)
CALLS = {
    "ours": {
        "jsonrpc": "2.0",
        "id": 3,
        "method": "tools/call",
        "params": {"name": "restore_state", "arguments": {}},
    },
    "noop": {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "noop", "arguments": {}}},
}

MESSAGES = [
    {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "bench", "version": "0"},
        },
    },
    {"jsonrpc": "2.0", "method": "notifications/initialized"},
    {"jsonrpc": "2.0", "id": 2, "method": "tools/list"},
]


def our_command(db: str, checkout: str | None = None) -> list[str]:
    """The installed console script; with `checkout`, `python -m mcp_harness` run from that folder
    (another version of the code, e.g. `git worktree add /tmp/before COMMIT`), which it imports first."""
    script = Path(sys.executable).with_name("mcp-harness")
    head = [str(script)] if script.exists() and not checkout else [sys.executable, "-m", "mcp_harness"]
    return [*head, "serve", "--db", db, "--workspace", "bench", "--agent", "bench"]


def noop_command() -> list[str]:
    return [sys.executable, str(HERE / "noop_server.py")]


def read_answer(proc: subprocess.Popen, wanted: int) -> dict:
    assert proc.stdout is not None
    while True:
        line = proc.stdout.readline()
        if not line:
            raise RuntimeError(f"the server exited before answering request {wanted}")
        answer = json.loads(line)
        if answer.get("id") == wanted:
            return answer


def one_round(command: list[str], call: dict | None, cwd: str | None = None) -> tuple[float, ...]:
    """Spawn and wait for the tools/list answer (start); call one tool and wait for its answer (the
    first call, from spawn: what a server defers at start shows here); close stdin and wait for the
    process to end (exit). Without `call` (a probe): (start, exit after the bare tools/list)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MCP_HARNESS_")}
    env["CLAUDE_CODE_SESSION_ID"] = str(uuid.uuid4())  # as Claude Code starts a session's servers
    t0 = time.perf_counter()
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env, cwd=cwd
    )
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in MESSAGES))
    proc.stdin.flush()
    if not read_answer(proc, 2).get("result", {}).get("tools"):
        raise RuntimeError(f"{command[0]} listed no tools")
    started = time.perf_counter() - t0
    if call is None:
        t1 = time.perf_counter()
        proc.stdin.close()
        proc.wait(timeout=30)
        exited = time.perf_counter() - t1
        proc.stdout.close()
        return started, exited
    proc.stdin.write(json.dumps(call).encode() + b"\n")
    proc.stdin.flush()
    if read_answer(proc, 3).get("result", {}).get("isError", True):
        raise RuntimeError(f"{command[0]} failed the tool call")
    first_call = time.perf_counter() - t0
    t1 = time.perf_counter()
    proc.stdin.close()
    proc.wait(timeout=30)
    exited = time.perf_counter() - t1
    proc.stdout.close()
    return started, first_call, exited


def measure(rounds: int, baseline: str | None) -> dict[str, dict[str, list[float]]]:
    """Every server once per round, in turns: (name, command, tool call, working folder)."""
    samples: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        servers = [
            ("noop", noop_command(), CALLS["noop"], None),
            ("ours", our_command(str(Path(tmp) / "harness.db")), CALLS["ours"], None),
        ]
        if baseline:
            servers.append(("baseline", our_command(str(Path(tmp) / "base.db"), baseline), CALLS["ours"], baseline))
        for _name, command, call, cwd in servers:
            one_round(command, call, cwd)  # warm the page cache and .pyc files (and make the databases)
        for _ in range(rounds):
            for name, command, call, cwd in servers:
                got = samples.setdefault(name, {p: [] for p in PHASES})
                for phase, seconds in zip(("start", "first_call", "exit"), one_round(command, call, cwd), strict=True):
                    got[phase].append(seconds)
                got["bare_exit"].append(one_round(command, None, cwd)[1])
    return samples


def compile_bytecode(checkout: str | None) -> None:
    """Write our modules' bytecode first, as `pip install` does for a regular install: an editable
    install (or PYTHONDONTWRITEBYTECODE=1, set on some machines) would otherwise compile every module
    of ours from source at every start, while the SDK's are compiled, and the ratio would measure that."""
    import mcp_harness

    roots = [Path(mcp_harness.__file__).parent] + ([Path(checkout) / "mcp_harness"] if checkout else [])
    for root in roots:
        compileall.compile_dir(str(root), quiet=1)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--baseline", metavar="DIR", help="also measure the mcp-harness checked out in DIR (before)")
    args = parser.parse_args()
    compile_bytecode(args.baseline)
    samples = measure(args.rounds, args.baseline)
    print(f"{args.rounds} rounds, servers taking turns; medians (min-max); ratios against the no-op server")
    print(
        "| phase | mcp-harness | no-op MCPServer | ratio | target | met |"
        + (" baseline (ratio) |" if args.baseline else "")
    )
    print("|---|---|---|---|---|---|" + ("---|" if args.baseline else ""))
    failed = False
    for phase, (label, target, against) in PHASES.items():
        median = {w: statistics.median(samples[w][phase]) for w in samples}
        spread = {w: f"{min(samples[w][phase]) * 1000:.0f}-{max(samples[w][phase]) * 1000:.0f}" for w in samples}
        shown = {w: f"{median[w] * 1000:.0f} ms ({spread[w]})" for w in samples}
        noop = statistics.median(samples["noop"][against])
        ratio = median["ours"] / noop
        met = ratio <= target
        failed |= not met
        versus = "" if against == phase else f" (vs its {PHASES[against][0].split(' answer')[0]}: {noop * 1000:.0f} ms)"
        verdict = "yes" if met else "no"
        row = f"| {label} | {shown['ours']} | {shown['noop']}{versus} | {ratio:.2f}x | <= {target}x | {verdict} |"
        if args.baseline:
            row += f" {shown['baseline']} ({median['baseline'] / noop:.2f}x) |"
        print(row)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
