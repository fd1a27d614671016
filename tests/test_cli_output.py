"""What people see from the CLI: tables on a terminal (colour unless NO_COLOR), progress bars on a
terminal's stderr, notes about other workspaces, and no complaint when stdout's reader goes away."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys

import pytest
from support import call, mcp_client, run_cli, subprocess_env

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # every test runs the command line in a process
YELLOW = "\x1b[33m"


@pytest.fixture
async def project_db(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace, agent="coder") as c:
        await call(c, "add_tasks", tasks=[{"key": "api", "title": "Build the API"}, {"key": "ui", "title": "UI"}])
        await call(c, "claim_task", task_key="api")
        await call(c, "record_progress", summary="started", task_key="api")
        await call(c, "save_checkpoint", state={f"key{i}": "x" * 100 for i in range(2000)})  # ~230 KB
    return sqlite_url.split("///", 1)[1], workspace


def on_terminal(*args: str, stream: str = "stdout", **env: str) -> tuple[str, int]:
    """Run the CLI with `stream` on a pseudo-terminal; return what the terminal showed and the exit status."""
    master, slave = pty.openpty()
    other = subprocess.DEVNULL
    proc = subprocess.Popen(
        [sys.executable, "-m", "mcp_harness", *args],
        env=subprocess_env(**env),
        stdout=slave if stream == "stdout" else other,
        stderr=slave if stream == "stderr" else other,
    )
    os.close(slave)
    chunks = []
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the process closed its end
            break
        if not chunk:
            break
        chunks.append(chunk)
    os.close(master)
    return b"".join(chunks).decode(errors="replace"), proc.wait(timeout=60)


async def test_tables_are_coloured_on_a_terminal_unless_no_color(project_db):
    db, ws = project_db
    shown, status = on_terminal("tasks", "--db", db, "--workspace", ws)
    assert status == 0 and YELLOW in shown and "Build the API" in shown  # claimed is yellow
    plain, status = on_terminal("tasks", "--db", db, "--workspace", ws, NO_COLOR="1")
    assert status == 0 and YELLOW not in plain and "Build the API" in plain
    piped = run_cli("tasks", "--db", db, "--workspace", ws)
    assert "\x1b[" not in piped.stdout and piped.stdout.splitlines()[1].split() == [
        "KEY",
        "STATUS",
        "OWNER",
        "LEASE",
        "PRI",
        "TRY",
        "KIND",
        "TITLE",
    ]


async def test_progress_bars_on_a_terminal_only(project_db, tmp_path):
    db, ws = project_db
    shown, status = on_terminal("export", "--db", db, "--workspace", ws, stream="stderr")
    assert status == 0 and "exported rows" in shown and "100%" in shown
    piped = run_cli("export", "--db", db, "--workspace", ws)
    assert piped.returncode == 0 and piped.stderr == ""
    backup = tmp_path / "backup.jsonl"
    backup.write_text(piped.stdout)
    shown, status = on_terminal("import", str(backup), "--db", str(tmp_path / "new.db"), stream="stderr")
    assert status == 0 and "importing" in shown and "100%" in shown
    shown, status = on_terminal("prune", "--keep-last", "1", "--db", db, "--workspace", ws, stream="stderr")
    assert status == 0 and "pruned workspaces" in shown


async def test_a_closed_stdout_is_not_an_error(project_db):
    db, ws = project_db
    for args in (["show", "main"], ["export"], ["log"], ["tasks"]):
        proc = subprocess.Popen(
            [sys.executable, "-m", "mcp_harness", *args, "--db", db, "--workspace", ws],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=subprocess_env(),
        )
        assert proc.stdout.readline()  # like `| head -1`: read a line, then go away
        proc.stdout.close()
        assert proc.wait(timeout=60) == 0, args
        assert proc.stderr.read() == b"", args
        proc.stderr.close()


async def test_an_empty_workspace_names_the_ones_that_exist(project_db):
    db, ws = project_db
    status = run_cli("status", "--db", db)  # the default workspace: nothing there
    assert status.returncode == 0 and f"this database holds: {ws}" in status.stdout
    as_json = run_cli("status", "--db", db, "--json")
    assert as_json.returncode == 0 and json.loads(as_json.stdout)["threads"] == [] and ws in as_json.stderr
    for args in (["log"], ["tasks"]):
        out = run_cli(*args, "--db", db)
        assert out.returncode == 0 and f"this database holds: {ws}" in out.stderr, args
    history = run_cli("history", "main", "--db", db)
    assert history.returncode == 2 and "has no checkpoint" in history.stderr and ws in history.stderr
    assert run_cli("status", "--db", db, "--workspace", ws).stderr == ""


async def test_history_of_an_unknown_thread_fails_like_show(project_db):
    db, ws = project_db
    for args in (["history", "nope"], ["history", "nope", "--json"], ["show", "nope"]):
        out = run_cli(*args, "--db", db, "--workspace", ws)
        assert out.returncode == 2 and out.stdout == "", args
        assert out.stderr.strip() == "mcp-harness: thread 'nope' has no checkpoint", args


#: what an agent could write to rewrite what a person reads before approving (issue 26)
HOSTILE = (
    "ok\x1b[2K\x1b[1G\x1b[32m APPROVED by security team"  # erase the line, go to column 1, green
    "\x1b[8m hidden"  # concealed text
    "\x1b]0;window title\x07"  # OSC 0
    "\x1b]52;c;ZWNobyBwd25lZA==\x07"  # OSC 52: the clipboard
    "\x9b2K\x9d0;c1 osc\x9c"  # the same as C1 controls
    "\r\x08\u202eevil\u2066"  # carriage return, backspace, bidi override and isolate (NUL is refused on input)
)
RAW = ("\x1b", "\x07", "\x9b", "\x9d", "\x9c", "\r", "\x08", "\x00", "\u202e", "\u2066")


def test_clean_escapes_control_characters_visibly_and_keeps_text():
    from mcp_harness.cli.output import clean

    assert clean("a\x1b[2Kb\tc\r\nd") == "a\\u001b[2Kb c\nd"
    assert clean("line one\nline two", multiline=False) == "line one line two"
    assert clean("\x9b31m \u202eabc \x7f") == "\\u009b31m \\u202eabc \\u007f"
    assert clean("naïve — 日本語 👩‍💻") == "naïve — 日本語 👩‍💻"  # text, emoji joiners included, stays
    assert not any(c in clean(HOSTILE) for c in RAW)
    escaped = clean(json.dumps({"t": "\x9b\u202e"}, ensure_ascii=False))
    assert json.loads(escaped) == {"t": "\x9b\u202e"}  # JSON for people stays JSON, same values


async def test_agents_text_reaches_no_terminal_raw_but_json_stays_exact(sqlite_url, workspace):
    async with mcp_client(sqlite_url, workspace, agent="coder") as c:
        await call(
            c,
            "add_tasks",
            tasks=[
                {"key": "rev", "title": HOSTILE, "review": True},
                {"key": "other", "title": HOSTILE, "description": HOSTILE},
            ],
        )
        lease = (await call(c, "claim_task", task_key="rev"))["lease"]["token"]
        await call(
            c,
            "update_task",
            task_key="rev",
            action="complete",
            lease_token=lease,
            verification=HOSTILE,
            result={"note": HOSTILE},
        )
        await call(c, "claim_task", task_key="other")
        await call(c, "record_progress", summary=HOSTILE, details=HOSTILE, next_steps=[HOSTILE], task_key="rev")
        await call(c, "save_checkpoint", state={"x": HOSTILE}, label="v1", metadata={"m": HOSTILE})
    db = sqlite_url.split("///", 1)[1]
    common = ("--db", db, "--workspace", workspace)
    for command in (
        ["review", "list"],
        ["tasks"],
        ["tasks", "show", "rev"],
        ["tasks", "show", "other"],
        ["log"],
        ["brief"],
        ["status"],
        ["history", "main"],
        ["show", "main"],
    ):
        out = run_cli(*command, *common)
        assert out.returncode == 0, (command, out.stderr)
        shown = out.stdout + out.stderr
        assert not [c for c in RAW if c in shown], (command, shown)
        if command not in (["status"], ["history", "main"]):  # these show no agent text here
            assert "\\u001b[2K" in shown or "\\u001b" in shown, (command, shown)  # visible, not dropped
    board = json.loads(run_cli("tasks", "--json", *common).stdout)
    assert {t["key"]: t["title"] for t in board["tasks"]}["rev"] == HOSTILE  # --json: exact
    log = json.loads(run_cli("log", "--json", *common).stdout)
    assert log[0]["summary"] == HOSTILE
    terminal, status = on_terminal("review", "list", *common)
    assert status == 0 and "\x1b]" not in terminal and "\x1b[2K" not in terminal and "\x1b[8m" not in terminal


async def test_a_newline_in_an_agents_title_or_summary_cannot_pass_for_a_row(sqlite_url, workspace):
    fake = "Migrate DB\nsec-ok  done  ann  approved by security team"
    async with mcp_client(sqlite_url, workspace, agent="coder") as c:
        await call(c, "add_tasks", tasks=[{"key": "mig", "title": fake, "review": True}])
        lease = (await call(c, "claim_task", task_key="mig"))["lease"]["token"]
        await call(c, "update_task", task_key="mig", action="complete", lease_token=lease, verification="ok")
        await call(c, "record_progress", summary=fake, details="line one\nline two", next_steps=[fake])
    common = ("--db", sqlite_url.split("///", 1)[1], "--workspace", workspace)
    for command in (["review", "list"], ["tasks", "--status", "in_review"], ["log"]):
        out = run_cli(*command, *common, env=subprocess_env(COLUMNS="400"))
        assert out.returncode == 0, out.stderr
        lines = out.stdout.splitlines()
        assert not [line for line in lines if line.lstrip().startswith("sec-ok")], (command, out.stdout)
        assert any("Migrate DB sec-ok" in line for line in lines), (command, out.stdout)
    log = run_cli("log", *common, env=subprocess_env(COLUMNS="400")).stdout
    assert "line one\n" in log  # details are multi-line text and keep their lines
