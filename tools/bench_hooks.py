"""The per-prompt hook's cost: `mcp-harness hook UserPromptSubmit` with nothing new, against a bare
`python -c pass`, in the same run.

    .venv/bin/python tools/bench_hooks.py [--rounds 30] [--db URL]

Claude Code runs the UserPromptSubmit hook before every prompt reaches the model, so its cost is paid
on every turn. Both commands are spawned in turns (paired runs: the machine's load falls on both
alike), the hook as installed (the `mcp-harness` console script beside this Python) with a recorded
input on stdin, on a database holding a workspace with tasks and events made before the clock starts
(a SQLite file by default; `--db postgresql+asyncpg://...` for PostgreSQL). Medians are reported with
their ratio and the target (<= 4x). The hook must print nothing: nothing changed for its session.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET = 4.0
SESSION = "5e55ion0-0000-4000-8000-000000000000"


def prepare(db: str) -> None:
    """A workspace with tasks, claims and events: what a project in use holds."""
    import anyio

    from mcp_harness.config import Settings
    from mcp_harness.models import TaskSpec
    from mcp_harness.service import Harness, Identity

    async def fill() -> None:
        async with Harness.open(Settings.from_env(db)) as h:
            me, other = Identity("bench", "claude-code:5e55ion0"), Identity("bench", "other")
            await h.tasks.add(me, tasks=[TaskSpec(key=f"t{i}", title=f"task {i}") for i in range(200)])
            for who in [me, other] * 20:
                got = await h.tasks.claim(who)
                await h.tasks.update(who, task_key=got.task.key, action="complete", lease_token=got.lease.token,
                                     verification="checked")  # fmt: skip
            await h.tasks.claim(me)

    anyio.run(fill)


def timed(command: list[str], stdin: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    out = subprocess.run(command, input=stdin, capture_output=True, env=env, check=True)
    return time.perf_counter() - start, out.stdout


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=30)
    parser.add_argument("--db", default=None, help="default: a new SQLite file")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        db = args.db or str(Path(tmp) / "bench.db")
        prepare(db)
        script = Path(sys.executable).with_name("mcp-harness")
        hook = [str(script) if script.exists() else sys.executable, *([] if script.exists() else ["-m", "mcp_harness"]),
                "hook", "UserPromptSubmit", "--db", db, "--workspace", "bench"]  # fmt: skip
        event = {"session_id": SESSION, "transcript_path": f"{tmp}/t.jsonl", "cwd": tmp, "permission_mode": "default",
                 "hook_event_name": "UserPromptSubmit", "prompt": "go on"}  # fmt: skip
        stdin = json.dumps(event).encode()
        env = {**os.environ, "XDG_RUNTIME_DIR": tmp}
        env.pop("MCP_HARNESS_SESSION", None)
        timed(hook, stdin, env)  # the first run sets the session's mark (and warms the disk cache)
        bare, ours = [], []
        for _ in range(args.rounds):
            bare.append(timed([sys.executable, "-c", "pass"], b"", env)[0])
            seconds, printed = timed(hook, stdin, env)
            if printed:
                raise SystemExit(f"the hook printed {printed[:200]!r} with nothing new")
            ours.append(seconds)
    b, o = statistics.median(bare), statistics.median(ours)
    print(f"python -c pass          median {b * 1000:7.1f} ms")
    print(f"hook UserPromptSubmit   median {o * 1000:7.1f} ms   {o / b:.2f}x (target <= {TARGET:g}x)")
    return 0 if o / b <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
