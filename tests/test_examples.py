"""The worked examples run with one command each and do what they say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import subprocess_env

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
pytestmark = pytest.mark.slow  # every example runs as its own process


def run_example(name: str, *args: str) -> tuple[str, dict]:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args], capture_output=True, text=True, env=subprocess_env(),
        timeout=180,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc.stdout, json.loads(proc.stdout.strip().splitlines()[-1])


def test_resume_after_crash(tmp_path):
    """After SIGKILL every acknowledged progress entry and checkpoint is there, and one restore_state
    points the next session at the held task and its next step."""
    out, facts = run_example("resume_after_crash.py", "--db", str(tmp_path / "demo.db"))
    assert "SIGKILL" in out
    assert facts["all_progress_kept"] and facts["all_checkpoints_kept"]
    assert facts["held_task"] == "step-3" and facts["same_lease"]
    assert facts["next_step"] == "step-3: add input validation" and facts["state_current"] == "step-3"
    assert facts["completed_after_resume"]
    assert facts["task_counts"] == {
        "pending": 2,
        "claimed": 0,
        "in_review": 0,
        "done": 3,
        "failed": 0,
        "cancelled": 0,
        "blocked": 0,
    }
    integrity = subprocess.run(
        [sys.executable, "-c", "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("
         "'PRAGMA integrity_check').fetchone()[0])", str(tmp_path / "demo.db")],
        capture_output=True, text=True, timeout=30,
    )  # fmt: skip
    assert integrity.stdout.strip() == "ok"


def test_http_team():
    """Three agents over one HTTP server: a killed agent's task is finished by a teammate once its
    lease runs out, and every task completes after its dependencies."""
    out, facts = run_example("http_team.py")
    assert f"killed agent {facts['victim']} while it held" in out
    assert facts["killed_holding"] and facts["finished_by"] in {"ann", "bo", "cy"} - {facts["victim"]}
    assert facts["counts"] == {
        "pending": 0,
        "claimed": 0,
        "in_review": 0,
        "done": 10,
        "failed": 0,
        "cancelled": 0,
        "blocked": 0,
    }
    assert facts["order_ok"] and len(facts["completed"]) == 10
