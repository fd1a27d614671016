"""What the real Claude Code sends and waits for with the harness: the bytes of our tools in its requests,
and the time from its start to the harness `connected`.

    python tools/claude_code_figures.py [--rounds 5] [--claude PATH] [--only tools|connect]

Claude Code runs headless (`claude -p --output-format stream-json --verbose`) against the tests'
scripted model (`tests/support/scripted_model.py`), with the harness as its only MCP server
(`--mcp-config`, `--strict-mcp-config`: no project settings, no hooks). The binary is
`MCP_HARNESS_TEST_CLAUDE`, else `--claude`, else the pinned release the tests install.

- tools: the bytes of each tool definition as Claude Code sends it in a request (compact JSON, UTF-8).
  By default Claude Code defers MCP tools: the first request names them in a system reminder, one a
  line, and the model loads them with `ToolSearch` (`select:` all of ours); the request after that
  carries their definitions beside Claude Code's own tools. With `ENABLE_TOOL_SEARCH=false` every tool
  is in the first request.
- connect: the time from spawning `claude` to its stream's `init` event, and the harness's status in
  that event, for the harness, a no-op MCP server (`tools/noop_server.py`) and no MCP server at all,
  in turns; with `MCP_CONNECTION_NONBLOCKING=0` (Claude Code waits for its servers, up to
  `MCP_CONNECT_TIMEOUT_MS`) and with Claude Code's default (it does not wait: a server still starting
  is `pending` and its tools are missing from the first turn). Beside it, Claude Code's own figure from
  its debug log (`--debug-file`): "Successfully connected ... in N ms", its spawn to the answer of
  `initialize`.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.claude_code import claude_command, environment, locate, parse_stream  # noqa: E402
from support.scripted_model import Request, ScriptedModel, Step, load, say  # noqa: E402

PREFIX = "mcp__harness__"


def server_config(folder: Path, which: str) -> Path:
    """An MCP configuration naming one server `harness`: ours (`serve` on a fresh SQLite file) or the
    no-op one; `none` names no server."""
    servers: dict[str, Any] = {}
    if which == "harness":
        script = Path(sys.executable).with_name("mcp-harness")
        head = [str(script)] if script.exists() else [sys.executable, "-m", "mcp_harness"]
        command = [*head, "serve", "--db", str(folder / "h.db"), "--workspace", "figures", "--agent", "claude-code"]
        servers["harness"] = {"type": "stdio", "command": command[0], "args": command[1:]}
    elif which == "noop":
        servers["harness"] = {"type": "stdio", "command": sys.executable, "args": [str(HERE / "noop_server.py")]}
    path = folder / f"mcp-{which}.json"
    path.write_text(json.dumps({"mcpServers": servers}))
    return path


def flags(config: Path) -> list[str]:
    return ["--mcp-config", str(config), "--strict-mcp-config", "--allowedTools", "mcp__harness"]


def size(value: Any) -> int:
    return len(json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode())


def version(binary: Path) -> str:
    done = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=60)
    return done.stdout.strip().split()[0] if done.stdout.strip() else "unknown"


def run(binary: Path, folder: Path, env: dict[str, str], *args: str) -> list[dict[str, Any]]:
    done = subprocess.run(
        claude_command(binary, "start", *args),
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )
    return parse_stream(done.stdout)


def split_tools(request: Request) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    tools = request.body.get("tools", [])
    return [t for t in tools if str(t.get("name", "")).startswith(PREFIX)], [
        t for t in tools if not str(t.get("name", "")).startswith(PREFIX)
    ]


def deferred_names(request: Request) -> list[str]:
    """The harness's names in the reminder that lists the deferred tools, one a line."""
    return [line.strip() for line in request.text().splitlines() if line.strip().startswith(PREFIX)]


def measure_tools(binary: Path, folder: Path, home: Path) -> dict[str, Any]:
    config = server_config(folder, "harness")
    names: list[str] = []

    def script(turn: Any) -> list[Step]:
        return [load(*names), say("loaded")]

    with ScriptedModel(lambda turn: [say("listed")]) as model:  # which tools the server offers
        events = run(binary, folder, environment(home, model.url), *flags(config))
    init = next(e for e in events if e.get("subtype") == "init")
    names[:] = [t for t in init["tools"] if t.startswith(PREFIX)]
    with ScriptedModel(script) as model:
        run(binary, folder, environment(home, model.url), *flags(config))
        first, loaded = model.conversation()[:2]
    with ScriptedModel([say("all at once")]) as model:
        run(binary, folder, environment(home, model.url, ENABLE_TOOL_SEARCH="false"), *flags(config))
        (eager,) = model.conversation()[:1]
    ours, own = split_tools(loaded)
    deferred = deferred_names(first)
    eager_ours, eager_own = split_tools(eager)
    return {
        "names": len(names),
        "loaded": (len(ours), sum(size(t) for t in ours)),
        "own": (len(own), sum(size(t) for t in own)),
        "own_first": (len(split_tools(first)[1]), sum(size(t) for t in split_tools(first)[1])),
        "deferred": (len(deferred), sum(len(n.encode()) + 1 for n in deferred)),
        "eager": (len(eager_ours), sum(size(t) for t in eager_ours)),
        "eager_own": (len(eager_own), sum(size(t) for t in eager_own)),
        "per_tool": sorted(((t["name"][len(PREFIX) :], size(t)) for t in ours), key=lambda p: -p[1]),
    }


CONNECTED = re.compile(r'MCP server "harness": Successfully connected .* in (\d+)ms')


def time_to_init(binary: Path, folder: Path, env: dict[str, str], config: Path) -> tuple[float, str | None, float]:
    """Seconds from spawning claude to its stream's init event, the server's status there, and the
    seconds Claude Code's debug log gives its connection (nan without a server)."""
    log = folder / "debug.log"
    log.unlink(missing_ok=True)
    began = time.perf_counter()
    proc = subprocess.Popen(
        claude_command(binary, "start", *flags(config), "--debug", "mcp", "--debug-file", str(log)),
        cwd=folder,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    assert proc.stdout is not None
    took, status = float("nan"), None
    for line in proc.stdout:
        event = next(iter(parse_stream(line)), {})
        if event.get("subtype") == "init":
            took = time.perf_counter() - began
            status = next((s.get("status") for s in event.get("mcp_servers", []) if s.get("name") == "harness"), None)
            break
    proc.stdout.read()
    proc.wait(timeout=120)
    found = CONNECTED.search(log.read_text(errors="replace")) if log.exists() else None
    return took, status, int(found.group(1)) / 1000 if found else float("nan")


def measure_connect(binary: Path, folder: Path, home: Path, rounds: int) -> dict[tuple[str, str], list]:
    configs = {which: server_config(folder, which) for which in ("none", "noop", "harness")}
    samples: dict[tuple[str, str], list] = {}
    with ScriptedModel(lambda turn: [say("ok")]) as model:
        waiting = environment(home, model.url)
        default = {
            k: v for k, v in waiting.items() if k not in ("MCP_CONNECTION_NONBLOCKING", "MCP_CONNECT_TIMEOUT_MS")
        }
        modes = {"MCP_CONNECTION_NONBLOCKING=0": waiting, "default": default}
        for config in configs.values():  # warm the page cache and .pyc files, make the database
            time_to_init(binary, folder, waiting, config)
        for _ in range(rounds):
            for mode, env in modes.items():
                for which, config in configs.items():
                    samples.setdefault((mode, which), []).append(time_to_init(binary, folder, env, config))
    return samples


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--claude", type=Path, help="the Claude Code binary (default: the tests' pinned one)")
    parser.add_argument("--only", choices=("tools", "connect"))
    args = parser.parse_args()
    binary = args.claude or locate()
    print(f"Claude Code {version(binary)} ({binary})")
    with tempfile.TemporaryDirectory() as tmp:
        folder, home = Path(tmp) / "project", Path(tmp) / "home"
        folder.mkdir()
        if args.only in (None, "tools"):
            got = measure_tools(binary, folder, home)
            rows = [
                ("ours, deferred: names in the first request's reminder", got["deferred"]),
                ("ours, loaded by ToolSearch select (the next request)", got["loaded"]),
                ("Claude Code's own, in that request", got["own"]),
                ("Claude Code's own, in the first request", got["own_first"]),
                ("ours, ENABLE_TOOL_SEARCH=false (first request)", got["eager"]),
                ("Claude Code's own, ENABLE_TOOL_SEARCH=false", got["eager_own"]),
            ]
            print("\n| what Claude Code sends | tools | bytes |\n|---|---|---|")
            for label, (count, total) in rows:
                print(f"| {label} | {count} | {total:,} |")
            print("\nours, each (loaded): " + ", ".join(f"{n} {b:,}" for n, b in got["per_tool"]))
        if args.only in (None, "connect"):
            samples = measure_connect(binary, folder, home, args.rounds)
            print(f"\n{args.rounds} rounds in turns; spawn to the stream's init event: median (min-max); status there")
            print("| mode | MCP server | to init, median | min-max | status at init | connected in (its log) |")
            print("|---|---|---|---|---|---|")
            for (mode, which), got in samples.items():
                times = [t for t, _, _ in got]
                statuses = {s: sum(1 for _, x, _ in got if x == s) for s in dict.fromkeys(x for _, x, _ in got)}
                said = ", ".join(f"{s or 'no server'} {n}/{len(got)}" for s, n in statuses.items())
                spread = f"{min(times) * 1000:.0f}-{max(times) * 1000:.0f} ms"
                logged = [c for _, _, c in got if c == c]
                own = f"{statistics.median(logged) * 1000:.0f} ms" if logged else "-"
                median = statistics.median(times) * 1000
                print(f"| {mode} | {which} | {median:.0f} ms | {spread} | {said} | {own} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
