"""The worked examples run with one command each and do what they say."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import subprocess_env

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
pytestmark = pytest.mark.slow  # every example runs as its own process


def run_example(name: str, *args: str) -> tuple[str, dict]:
    proc = subprocess.run(
        [sys.executable, str(EXAMPLES / name), *args],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=180,
    )
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
    assert facts["task_counts"] == {"pending": 2, "done": 3}  # zero buckets omitted
    integrity = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('PRAGMA integrity_check').fetchone()[0])",
            str(tmp_path / "demo.db"),
        ],
        capture_output=True,
        text=True,
        timeout=30,
    )
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


def test_multi_session_log_tells_the_story(tmp_path):
    """Initializer, a session that ends holding a task (its lease ends with it), two agents side by side,
    a failure retried, a handoff (a release with a reason reaching the next claimer with the dependency's
    result), a reopen: `mcp-harness log` alone shows each of them, the harness's own entries included."""
    out, facts = run_example("multi_session.py", "--db", str(tmp_path / "shop.db"))
    assert facts["statuses"] == dict.fromkeys(["schema", "api", "ui", "docs", "ci"], "done")
    log = out[out.index("$ mcp-harness log") :]
    harness = [(key, text) for agent, key, text in facts["log"] if agent == "harness"]
    failed = [t for k, t in harness if k == "api" and "failed on attempt 1" in t]
    assert failed and "integration test timed out" in failed[0] and "will be retried in" in failed[0]
    taken = [t for k, t in harness if k == "docs" and "took over task docs (attempt 2)" in t]
    assert taken and "the lease of ann ended: its connection ended" in taken[0]  # its session ended
    reopened = [t for k, t in harness if k == "schema" and "reopened task schema" in t]
    # the reopen's note says the reason and what it cleared (the result and verification it replaces)
    assert reopened and reopened[0].startswith(
        "tester reopened task schema: orders has no total column; the checkout needs it; it was done with result"
    ), reopened
    for text in (failed[0], taken[0], "tester reopened task schema"):
        assert text in log, text  # the people's log shows the same, on one line
    texts = [text for _agent, _key, text in facts["log"]]  # oldest first
    assert texts.index("schema: done and verified") < texts.index(failed[0]) < texts.index("api: done and verified")
    assert texts.index(taken[0]) < texts.index("docs: done and verified")
    assert facts["log"][-1] == ["ann", "schema", "schema: added orders.total"]  # the fix after the reopen
    assert facts["completed_by"]["api"] in {"ann", "bo"} and set(facts["completed_by"].values()) <= {"ann", "bo"}
    ended = [t for k, t in harness if k == "docs" and "the lease of ann on task docs ended" in t]
    assert ended and "its connection ended (stdin closed)" in ended[0] and texts.index(ended[0]) < texts.index(taken[0])

    handoff = facts["handoff"]  # the release's reason and api's result reach the other agent's claim
    assert handoff["claimed_by"] in {"ann", "bo"} - {handoff["released_by"]}
    released = handoff["notes"][0]
    assert released["by"] == handoff["released_by"] and released["text"].endswith(
        "released task ui: out of time: the page lists products, pagination is still missing"
    )
    assert handoff["notes"][1]["text"] == "ui: the page lists products"
    assert handoff["dependencies"] == [  # ui's own dependency first, then what api depends on
        {"key": "api", "status": "done", "result": {"commit": "c-api"}, "verification": "checked every step of api"},
        {
            "key": "schema",
            "status": "done",
            "result": {"commit": "c-schema"},
            "verification": "checked every step of schema",
        },
    ]
    assert facts["completed_by"]["ui"] == handoff["claimed_by"] and released["text"] in log
