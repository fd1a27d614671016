"""What the lifecycle hooks cost: the per-prompt hook against a bare interpreter start, and a whole
Claude Code session with the hooks against the same session without them, in the same run.

    .venv/bin/python tools/bench_hooks.py [--rounds 30] [--sessions 8] [--db URL] [--claude PATH]

The per-prompt part: Claude Code runs the UserPromptSubmit hook before every prompt reaches the
model, so its cost is paid on every turn. `mcp-harness hook UserPromptSubmit` (as installed: the
`mcp-harness` console script beside this Python) with a recorded input and nothing new, and `python -c
pass`, are spawned in turns (paired runs: the machine's load falls on both alike). Target: <= 4x.

The session part (when a Claude Code binary is found: `--claude`, `MCP_HARNESS_TEST_CLAUDE`, or
`claude` on PATH): `claude -p` in a project set up by `mcp-harness init`, against a scripted model on
loopback (tests/support/scripted_model.py) that answers one turn, run in turns with the project's
hooks and with `--settings '{"disableAllHooks": true}'`. The hooks that run are SessionStart (the
brief), UserPromptSubmit and SessionEnd (whose write a detached process does after the session:
`SETTLE` seconds between sessions keep it out of the next one's time). Target: the hooks add <= 0.5 s
(median with minus median without). Both parts use a database holding a workspace with tasks, events
and a checkpoint made before the clock starts (a SQLite file by default; `--db postgresql+asyncpg://...`
for PostgreSQL).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs, SaveCheckpointArgs, UpdateTaskArgs

ROOT = Path(__file__).resolve().parent.parent
PROMPT_TARGET = 4.0  #: the per-prompt hook, against `python -c pass`
SESSION_TARGET = 0.5  #: seconds the hooks add to a session
SESSION = "5e55ion0-0000-4000-8000-000000000000"
WORKSPACE = "bench"
SETTLE = 2.0  #: seconds between sessions


def prepare(db: str) -> None:
    """A workspace with tasks, claims and events: what a project in use holds."""
    import anyio

    from mcp_harness.config import Settings
    from mcp_harness.models import TaskSpec
    from mcp_harness.service import Harness, Identity

    async def fill() -> None:
        async with Harness.open(Settings.from_env(db)) as h:
            me, other = Identity(WORKSPACE, "claude-code:5e55ion0"), Identity(WORKSPACE, "other")
            await h.tasks.add(me, AddTasksArgs(tasks=[TaskSpec(key=f"t{i}", title=f"task {i}") for i in range(200)]))
            for who in [me, other] * 20:
                got = await h.tasks.claim(who, ClaimTaskArgs())
                await h.tasks.update(
                    who,
                    UpdateTaskArgs(
                        task_key=got.task.key, action="complete", lease_token=got.lease.token, verification="checked"
                    ),
                )
            await h.tasks.claim(me, ClaimTaskArgs())
            await h.checkpoints.save(
                other, SaveCheckpointArgs(thread="main", state={"plan": "the shop", "done": 40}, label="midway")
            )

    anyio.run(fill)


def timed(command: list[str], stdin: bytes, env: dict[str, str], cwd: str | None = None) -> tuple[float, bytes]:
    start = time.perf_counter()
    out = subprocess.run(command, input=stdin, capture_output=True, env=env, check=True, cwd=cwd)
    return time.perf_counter() - start, out.stdout


def harness_command() -> list[str]:
    script = Path(sys.executable).with_name("mcp-harness")
    return [str(script)] if script.exists() else [sys.executable, "-m", "mcp_harness"]


def bench_prompt(db: str, tmp: str, rounds: int) -> bool:
    hook = [*harness_command(), "hook", "UserPromptSubmit", "--db", db, "--workspace", WORKSPACE]
    event = {
        "session_id": SESSION,
        "transcript_path": f"{tmp}/t.jsonl",
        "cwd": tmp,
        "permission_mode": "default",
        "hook_event_name": "UserPromptSubmit",
        "prompt": "go on",
    }
    stdin = json.dumps(event).encode()
    env = {**os.environ, "XDG_RUNTIME_DIR": tmp}
    env.pop("MCP_HARNESS_SESSION", None)
    timed(hook, stdin, env)  # the first run sets the session's mark (and warms the disk cache)
    bare, ours = [], []
    for _ in range(rounds):
        bare.append(timed([sys.executable, "-c", "pass"], b"", env)[0])
        seconds, printed = timed(hook, stdin, env)
        if printed:
            raise SystemExit(f"the hook printed {printed[:200]!r} with nothing new")
        ours.append(seconds)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"python -c pass               median {b * 1000:7.1f} ms")
    print(f"hook UserPromptSubmit        median {o * 1000:7.1f} ms   {o / b:.2f}x (target <= {PROMPT_TARGET:g}x)")
    return o / b <= PROMPT_TARGET


def find_claude(given: str | None) -> Path | None:
    found = given or os.environ.get("MCP_HARNESS_TEST_CLAUDE") or shutil.which("claude")
    return Path(found) if found else None


def context_bytes(db: str, workspace: str, tmp: str) -> int:
    """The bytes (UTF-8) of the context `hook SessionStart` gives a new session."""
    event = {
        "session_id": SESSION,
        "transcript_path": f"{tmp}/t.jsonl",
        "cwd": tmp,
        "hook_event_name": "SessionStart",
        "source": "startup",
    }
    env = {**os.environ, "XDG_RUNTIME_DIR": tmp}
    hook = [*harness_command(), "hook", "SessionStart", "--db", db, "--workspace", workspace]
    out = timed(hook, json.dumps(event).encode(), env)[1]
    return len(json.loads(out)["hookSpecificOutput"]["additionalContext"].encode())


def bench_sessions(db: str, tmp: str, rounds: int, claude: Path) -> bool:
    sys.path.insert(0, str(ROOT / "tests"))
    from support.claude_code import claude_command, environment, trust
    from support.scripted_model import ScriptedModel, say

    project = Path(tmp) / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    init = [*harness_command(), "init", "--db", db, "--workspace", WORKSPACE]
    subprocess.run(init, cwd=project, check=True, capture_output=True)
    home = Path(tmp) / "home"
    trust(home, project)
    off = ["--settings", json.dumps({"disableAllHooks": True})]
    with ScriptedModel([say("done")]) as model:
        env = environment(home, model.url, XDG_RUNTIME_DIR=tmp)

        def session(*extra: str) -> tuple[float, float]:
            """Its wall time, and the CPU time of Claude Code and every process it waited for (the
            hooks, the stdio server): less swayed by a busy machine than the wall time."""
            cpu = resource.getrusage(resource.RUSAGE_CHILDREN)
            start = time.perf_counter()
            done = subprocess.run(
                claude_command(claude, "go on", *extra),
                cwd=project,
                env=env,
                capture_output=True,
                text=True,
                timeout=120,
                stdin=subprocess.DEVNULL,
            )
            took = time.perf_counter() - start
            after = resource.getrusage(resource.RUSAGE_CHILDREN)
            time.sleep(SETTLE)  # the writing hooks' detached writers finish outside the clock, not in the next run
            if '"type":"result"' not in done.stdout.replace(" ", ""):
                raise SystemExit(f"claude -p gave no result (exit {done.returncode}): {done.stderr[-300:]}")
            return took, after.ru_utime - cpu.ru_utime + after.ru_stime - cpu.ru_stime

        session(), session(*off)  # warm the disk cache and Claude Code's first-run files
        without, with_hooks = [], []
        for _ in range(rounds):
            without.append(session(*off))
            with_hooks.append(session())
        briefed = sum("mcp-harness brief" in json.dumps(r.body) for r in model.conversation())
    a, b = (statistics.median(t for t, _ in runs) for runs in (without, with_hooks))
    ca, cb = (statistics.median(c for _, c in runs) for runs in (without, with_hooks))
    print(f"claude -p, hooks disabled    median {a:7.2f} s   (CPU {ca:.2f} s)")
    print(
        f"claude -p, with the hooks    median {b:7.2f} s   (CPU {cb:.2f} s)   +{b - a:.2f} s, CPU +{cb - ca:.2f} s "
        f"(target <= +{SESSION_TARGET:g} s)"
    )
    if briefed < rounds:
        raise SystemExit(f"the brief reached the model in {briefed} of {rounds + 1} sessions with hooks")
    return b - a <= SESSION_TARGET


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30, help="paired runs of the per-prompt hook")
    parser.add_argument("--sessions", type=int, default=8, help="paired Claude Code sessions (0: none)")
    parser.add_argument("--db", default=None, help="default: a new SQLite file")
    parser.add_argument(
        "--claude", default=None, help="the Claude Code binary (default: MCP_HARNESS_TEST_CLAUDE, PATH)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(ignore_cleanup_errors=True) as tmp:
        db = args.db or str(Path(tmp) / "bench.db")
        prepare(db)
        ok = bench_prompt(db, tmp, args.rounds)
        empty = context_bytes(str(Path(tmp) / "empty.db"), WORKSPACE, tmp)
        print(f"SessionStart context: {empty} B in an empty project, {context_bytes(db, WORKSPACE, tmp)} B mid-project")
        claude = find_claude(args.claude)
        if args.sessions <= 0:
            pass
        elif claude is None:
            print("no Claude Code binary (--claude, MCP_HARNESS_TEST_CLAUDE or claude on PATH): sessions not timed")
        else:
            ok = bench_sessions(db, tmp, args.sessions, claude) and ok
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
