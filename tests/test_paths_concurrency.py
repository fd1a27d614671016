"""Path reservations under real concurrency: 8 processes claim tasks whose paths overlap, on SQLite and
PostgreSQL; no two live exclusive reservations ever overlap (arq's `test_mung` shape: each worker notes
when it holds a task, the notes are replayed, and every task is done exactly once)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from collections import Counter

import pytest
from support import subprocess_env

from mcp_harness.base import Identity
from mcp_harness.service import Harness
from mcp_harness.tasks.patterns import overlap

from support import settings_for  # isort: skip
from mcp_harness.arguments import AddTasksArgs

pytestmark = pytest.mark.anyio

WORKERS = 8
#: 60 tasks over a few folders, so that many pairs overlap (a folder and the files in it, a wildcard)
AREAS = ["src/api/", "src/api/handlers.py", "src/*.py", "src/core/", "docs/", "docs/index.md", "tests/", "README.md"]

WORKER = textwrap.dedent(
    """
    import os, sys, anyio
    from mcp_harness.arguments import ClaimTaskArgs, UpdateTaskArgs
    from mcp_harness.config import Settings
    from mcp_harness.identity import Identity
    from mcp_harness.service import Harness

    url, workspace, agent, notes = sys.argv[1:5]

    def note(line):
        fd = os.open(notes, os.O_WRONLY | os.O_APPEND | os.O_CREAT)
        try:
            os.write(fd, (line + "\\n").encode())
        finally:
            os.close(fd)

    async def main():
        ident = Identity(workspace=workspace, agent=agent)
        async with Harness.open(Settings.from_env(url)) as h:
            while True:
                got = await h.tasks.claim(ident, ClaimTaskArgs(lease_seconds=300))
                if got.task is None:
                    if got.reason == "all_done":
                        return
                    await anyio.sleep(0.005)
                    continue
                key = got.task.key
                note(f"hold {agent} {key}")  # after the claim committed: the reservation is live
                await anyio.sleep(0.01)
                note(f"drop {agent} {key}")  # before the complete: still live
                done = UpdateTaskArgs(task_key=key, action="complete", lease_token=got.lease.token, verification="ok")
                await h.tasks.update(ident, done)

    anyio.run(main)
    """
)


@pytest.mark.slow
async def test_eight_processes_never_hold_overlapping_paths(db_url, workspace, tmp_path):
    tasks = [
        {"key": f"t{i}", "title": f"t{i}", "paths": [AREAS[i % len(AREAS)], AREAS[(i * 3 + 1) % len(AREAS)]]}
        for i in range(60)
    ]
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(Identity(workspace=workspace, agent="planner"), AddTasksArgs(tasks=tasks))
    notes = tmp_path / "notes"
    env = subprocess_env()
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, db_url, workspace, f"w{i}", str(notes)],
            env=env,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in range(WORKERS)
    ]
    for proc in procs:
        _, err = proc.communicate(timeout=240)
        assert proc.returncode == 0, err[-2000:]
    paths = {t["key"]: t["paths"] for t in tasks}
    held: dict[str, str] = {}  # task -> agent, replayed in the order the notes were written
    taken: Counter[str] = Counter()
    lines = notes.read_text().splitlines()
    for line in lines:
        kind, agent, key = line.split()
        if kind == "hold":
            for other, owner in held.items():
                if owner != agent:
                    assert not any(overlap(a, b) for a in paths[key] for b in paths[other]), (key, other, line)
            held[key] = agent
            taken[key] += 1
        else:
            assert held.pop(key) == agent
    assert taken == Counter({t["key"]: 1 for t in tasks})  # every task done exactly once
    assert len({line.split()[1] for line in lines}) > 1  # the work was shared
