"""The session runner's own cost, against bare `claude -p` loops doing the same sessions.

    python tools/bench_runner.py [--claude PATH] [--sessions 6] [--parallel 8] [--idle-seconds 60]

Each session is the real Claude Code against the tests' scripted model (`tests/support/scripted_model.py`),
completing its task in three turns through its own harness server. Three figures, each in one run:

- one slot: the wall time of `mcp-harness run` doing N sessions, against a bare loop that claims each
  task itself (in this process) and runs the same `claude -p` command one after another; target <= 1.1x;
- `--parallel` slots: sessions per minute of `run --parallel P` against P bare loops at once; target:
  the runner's rate >= the bare loops' / 1.2;
- idle: a runner waiting on a gate for `--idle-seconds`: its CPU time (user + system) over that time;
  target < 1% of a core.

Needs Claude Code: `--claude`, else `MCP_HARNESS_TEST_CLAUDE`, else the tests' pinned install. Exits 1
when a target is missed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "tests"))

from support.claude_code import environment, locate  # noqa: E402
from support.runner import add_tasks, completes, harness_do, project, runner_command  # noqa: E402
from support.scripted_model import ScriptedModel  # noqa: E402

from mcp_harness.arguments import ClaimTaskArgs  # noqa: E402
from mcp_harness.identity import Identity, session_agent  # noqa: E402
from mcp_harness.runner.agents import ClaudeCode, Plan, mcp_config  # noqa: E402
from mcp_harness.runner.prompt import task_prompt  # noqa: E402


def tasks(prefix: str, n: int) -> list[dict]:
    return [{"key": f"{prefix}{i}", "title": f"task {i}"} for i in range(n)]


def runner_seconds(db: str, ws: str, folder: Path, env: dict, claude: Path, parallel: int) -> float:
    began = time.monotonic()
    done = subprocess.run(
        [*runner_command(db, ws, "--parallel", str(parallel), claude=claude)],
        cwd=folder,
        env=env,
        capture_output=True,
        text=True,
        timeout=1800,
    )
    if done.returncode != 0:
        sys.exit(f"the runner failed: {done.stdout[-500:]} {done.stderr[-500:]}")
    return time.monotonic() - began


def bare_loop(db: str, ws: str, folder: Path, env: dict, claude: Path, data: Path) -> int:
    """Claim, run `claude -p` on the task, until nothing is claimable; returns the sessions run."""
    agent = ClaudeCode(str(claude), [])
    ran = 0
    while True:
        session = str(uuid.uuid4())
        ident = Identity(ws, session_agent(agent.base, session))
        claim = harness_do(db, lambda h, i=ident: h.tasks.claim(i, ClaimTaskArgs(lease_seconds=120)))
        if claim.task is None:
            return ran
        text = task_prompt(claim.task.model_dump(mode="json"), claim.lease.token, "bench", attempt=1, last=False)
        config = data / f"{session}.json"
        config.write_text(json.dumps(mcp_config(f"sqlite+aiosqlite:///{db}", ws, agent.base, session)))
        launch = agent.launch(Plan(session, ident.agent, text, folder, config, config, claim.task.key, None))
        subprocess.run(launch.argv, cwd=folder, env={**launch.env, **env}, capture_output=True, timeout=600)
        ran += 1


def bare_seconds(db: str, ws: str, folder: Path, env: dict, claude: Path, loops: int, data: Path) -> float:
    began = time.monotonic()
    threads = [threading.Thread(target=bare_loop, args=(db, ws, folder, env, claude, data)) for _ in range(loops)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return time.monotonic() - began


def idle_cpu(db: str, folder: Path, env: dict, claude: Path, seconds: float) -> float:
    """CPU seconds a runner uses while it waits on a gate for `seconds`."""
    add_tasks(
        db,
        "idle",
        [
            {"key": "gate", "title": "a person decides", "kind": "gate"},
            {"key": "after", "title": "then this", "depends_on": ["gate"]},
        ],
    )
    runner = subprocess.Popen(
        runner_command(db, "idle", claude=claude), cwd=folder, env=env, stdout=subprocess.PIPE, text=True
    )
    assert runner.stdout is not None
    while "waiting" not in runner.stdout.readline():
        pass
    ticks = os.sysconf("SC_CLK_TCK")

    def cpu() -> float:
        fields = Path(f"/proc/{runner.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / ticks

    start = cpu()
    time.sleep(seconds)
    used = cpu() - start
    runner.terminate()
    runner.wait(timeout=30)
    return used


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--claude", type=Path, default=None)
    parser.add_argument("--sessions", type=int, default=6)
    parser.add_argument("--parallel", type=int, default=8)
    parser.add_argument("--idle-seconds", type=float, default=60)
    parser.add_argument("--only", choices=("one", "parallel", "idle"), default=None, help="one figure only")
    args = parser.parse_args()
    claude = args.claude or locate()
    missed = []
    with tempfile.TemporaryDirectory() as tmp, ScriptedModel(completes) as model:
        root = Path(tmp)
        folder = project(root)
        env = environment(root / "home", model.url)
        data = root / "configs"
        data.mkdir()
        db = str(root / "h.db")

        if args.only in (None, "one"):
            missed += one_slot(db, folder, env, claude, args.sessions, data)
        if args.only in (None, "parallel"):
            missed += slots(db, folder, env, claude, args.sessions, args.parallel, data)
        if args.only in (None, "idle"):
            used = idle_cpu(db, folder, env, claude, args.idle_seconds)
            share = used / args.idle_seconds * 100
            said = f"{used:.2f} s of CPU, {share:.2f}% of a core (target < 1%)"
            print(f"idle on a gate for {args.idle_seconds:.0f} s: {said}")
            if share >= 1:
                missed.append("idle")
    if missed:
        print("missed: " + ", ".join(missed))
        return 1
    return 0


def one_slot(db: str, folder: Path, env: dict, claude: Path, sessions: int, data: Path) -> list[str]:
    add_tasks(db, "bare1", tasks("b", sessions))
    bare = bare_seconds(db, "bare1", folder, env, claude, 1, data)
    add_tasks(db, "run1", tasks("r", sessions))
    ours = runner_seconds(db, "run1", folder, env, claude, 1)
    ratio = ours / bare
    print(f"one slot, {sessions} sessions: runner {ours:.1f} s, bare loop {bare:.1f} s: {ratio:.2f}x (target <= 1.1x)")
    return ["one slot"] if ratio > 1.1 else []


def slots(db: str, folder: Path, env: dict, claude: Path, sessions: int, parallel: int, data: Path) -> list[str]:
    n = sessions * parallel // 2
    add_tasks(db, "bareP", tasks("b", n))
    bare = bare_seconds(db, "bareP", folder, env, claude, parallel, data)
    add_tasks(db, "runP", tasks("r", n))
    ours = runner_seconds(db, "runP", folder, env, claude, parallel)
    rate_bare, rate_ours = n / bare * 60, n / ours * 60
    print(
        f"{parallel} slots, {n} sessions: runner {rate_ours:.1f}/min, {parallel} bare loops "
        f"{rate_bare:.1f}/min: {rate_bare / rate_ours:.2f}x (target <= 1.2x)"
    )
    return [f"{parallel} slots"] if rate_bare / rate_ours > 1.2 else []


if __name__ == "__main__":
    sys.exit(main())
