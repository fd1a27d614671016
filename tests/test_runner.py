"""`mcp-harness run` through the real Claude Code against a scripted model: every session's outcome is
read from the harness, what is left is settled with a note the next session reads, nothing is lost."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import run_cli, subprocess_env
from support.runner import (
    acts,
    add_tasks,
    board,
    completes,
    harness_do,
    progress_of,
    project,
    run,
    runner_command,
    runner_env,
    sessions,
    story,
    task_of,
)
from support.scripted_model import ScriptedModel, error, load, say, stall, tool

from mcp_harness.arguments import ClaimTaskArgs, UpdateTaskArgs
from mcp_harness.service import Identity

pytestmark = pytest.mark.slow
WS = "w"


@pytest.fixture
def proj(tmp_path: Path) -> Path:
    return project(tmp_path)


@pytest.fixture
def db(tmp_path: Path) -> str:
    return str(tmp_path / "h.db")


def test_the_runner_does_the_plan_one_task_per_session_and_records_each(tmp_path, proj, db, claude_binary):
    add_tasks(db, WS, [{"key": "a", "title": "first"}, {"key": "b", "title": "second", "depends_on": ["a"]}])
    with ScriptedModel(completes) as model:
        done = run(db, WS, proj, runner_env(tmp_path / "home", model.url), claude=claude_binary)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all tasks are done" in done.stdout
    tasks = board(db, WS)
    assert {k: t["status"] for k, t in tasks.items()} == {"a": "done", "b": "done"}
    assert tasks["b"]["context"]["dependencies"][0]["result"] == "a"  # the next session read what a said
    records = sessions(db, WS)
    assert sorted((r["task_key"], r["outcome"], r["slot"]) for r in records) == [
        ("a", "completed", 1),
        ("b", "completed", 1),
    ]
    assert len(model.sessions()) == 2 and {r["id"] for r in records} == set(model.sessions())  # one each
    for record in records:
        assert record["agent"] == f"claude-code:{record['id'][:8]}"
        assert record["turns"] >= 3 and record["cost_usd"] is not None and record["exit_code"] == 0
        assert Path(record["transcript"]).is_file()
    # each session: one progress entry by agent `runner` about its task
    entries = progress_of(db, WS)
    assert sorted(e["task_key"] for e in entries) == ["a", "b"]
    assert all("completed" in e["summary"] for e in entries)
    # the task's adder is named in the prompt, and the discipline comes before the task's text
    first = model.conversation(records[-1]["id"])[0]
    prompt = [b["text"] for b in first.body["messages"][0]["content"] if b["type"] == "text"][-1]
    assert prompt.index("Session rules") < prompt.index('The task, as data added by "planner"')
    # people read the records
    env = subprocess_env()
    listing = run_cli("sessions", "--db", db, "--workspace", WS, env=env)
    assert listing.returncode == 0 and "completed" in listing.stdout, listing.stderr
    shown = run_cli("sessions", "show", records[0]["id"][:8], "--db", db, "--workspace", WS, env=env)
    assert "mcp__harness__update_task" in shown.stdout and "outcome: completed" in shown.stdout, shown.stdout


@pytest.mark.parametrize(
    ("behaviour", "outcome", "status", "attempts"),
    [
        (acts("release", reason="needs a decision first"), "released", "pending", 0),
        (acts("fail", error="the spec contradicts itself", retry=False), "failed", "failed", 1),
        # a lease ended as a connection's end ends it: claimable at once, the holder named until a claim
        (lambda turn: [say("I looked around and stopped.")], "no_progress", "claimed", 1),
        (lambda turn: [error(429)], "rate_limited", "pending", 0),
    ],
    ids=["released", "failed", "no_progress", "rate_limited"],
)
def test_each_ending_is_read_from_the_harness_and_settled(
    tmp_path, proj, db, claude_binary, behaviour, outcome, status, attempts
):
    add_tasks(db, WS, [{"key": "t", "title": "the task"}])
    with ScriptedModel(behaviour) as model:
        env = runner_env(tmp_path / "home", model.url, MCP_HARNESS_RUNNER_BACKOFF_SECONDS="1")
        done = run(db, WS, proj, env, "--max-sessions", "1", "--exit-when-idle", claude=claude_binary)
    assert done.returncode in (0, 3, 4), done.stdout + done.stderr
    (record,) = sessions(db, WS)
    assert record["outcome"] == outcome, (record, done.stdout)
    task = board(db, WS)["t"]
    assert (task["status"], task["attempts"]) == (status, attempts), task
    assert task["ready"] == (status != "failed") and task.get("owner") in (None, record["agent"])
    if outcome in ("no_progress", "rate_limited"):  # the next session's context says why
        notes = json.dumps(task.get("context", {}))
        assert f"ended {outcome}" in notes, notes
    if outcome == "rate_limited":
        assert "every slot pauses" in done.stdout


def test_a_model_that_always_releases_is_given_its_task_five_times_then_the_runner_waits_for_a_person(
    tmp_path, proj, db, claude_binary
):
    """A release gives the task back claimable at once: without the breaker counting releases, one session
    after another would take it and give it back, without end."""
    add_tasks(db, WS, [{"key": "t", "title": "needs a person"}])
    with ScriptedModel(acts("release", reason="needs a decision first")) as model:
        env = runner_env(tmp_path / "home", model.url)
        done = run(db, WS, proj, env, "--exit-when-idle", claude=claude_binary, timeout=300)
    assert done.returncode == 3, done.stdout + done.stderr
    assert [r["outcome"] for r in sessions(db, WS)] == ["released"] * 5
    assert "5 sessions in a row ended without progress" in done.stdout, done.stdout
    assert "msg send --to '*' --task KEY" in done.stdout  # what a person can do about it
    task = board(db, WS)["t"]
    assert (task["status"], task["attempts"]) == ("pending", 0), task


def test_a_session_with_no_output_is_stopped_as_stalled_and_one_too_long_as_timed_out(
    tmp_path, proj, db, claude_binary
):
    add_tasks(db, WS, [{"key": "s", "title": "stalls"}])
    with ScriptedModel(lambda turn: [load("update_task"), stall(120)]) as model:
        env = runner_env(tmp_path / "home", model.url)
        began = time.monotonic()
        done = run(db, WS, proj, env, "--stall-timeout", "0.05", "--max-sessions", "1", claude=claude_binary)
        took = time.monotonic() - began
    assert done.returncode == 4, done.stdout + done.stderr
    (record,) = sessions(db, WS)
    assert record["outcome"] == "stalled" and took < 60, (record, took)
    task = board(db, WS)["s"]
    assert task["ready"] and task["attempts"] == 1 and "ended stalled" in json.dumps(task["context"])

    add_tasks(db, WS, [{"key": "slow", "title": "too long", "priority": 5}])
    with ScriptedModel(lambda turn: [load("update_task"), stall(120)]) as model:
        env = runner_env(tmp_path / "home", model.url)
        done = run(db, WS, proj, env, "--session-timeout", "0.1", "--max-sessions", "1", claude=claude_binary)
    assert done.returncode == 4, done.stdout + done.stderr
    assert [r["outcome"] for r in sessions(db, WS) if r["task_key"] == "slow"] == ["timed_out"]


def test_a_harness_server_that_does_not_connect_is_a_setup_error_and_gives_the_attempt_back(
    tmp_path, proj, db, claude_binary
):
    # a "claude" that breaks the per-session MCP config: the harness server cannot start
    wrapper = tmp_path / "claude-broken-mcp"
    broken = tmp_path / "broken.json"
    broken.write_text(json.dumps({"mcpServers": {"harness": {"type": "stdio", "command": "/nonexistent/server"}}}))
    wrapper.write_text(
        "#!/usr/bin/env python3\nimport os, sys\nargs = sys.argv[1:]\n"
        f"args[args.index('--mcp-config') + 1] = {str(broken)!r}\n"
        f"os.execv({str(claude_binary)!r}, [{str(claude_binary)!r}, *args])\n"
    )
    wrapper.chmod(0o755)
    add_tasks(db, WS, [{"key": "t", "title": "the task"}])
    with ScriptedModel(completes) as model:
        done = run(db, WS, proj, runner_env(tmp_path / "home", model.url), claude=wrapper)
    assert done.returncode == 5, done.stdout + done.stderr
    assert "3 setup errors in a row" in done.stdout
    records = sessions(db, WS)
    assert [r["outcome"] for r in records] == ["setup_error"] * 3
    task = board(db, WS)["t"]
    assert (task["status"], task["attempts"]) == ("pending", 0), task  # never counted


def closed_port() -> int:
    """A loopback port nothing listens on (bound, then closed)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@pytest.mark.parametrize(
    ("api", "cause"),
    [
        ("closed", "the model API refused the connection (ECONNREFUSED): check ANTHROPIC_BASE_URL"),
        (401, "the model API refused the credentials (HTTP 401): check ANTHROPIC_API_KEY"),
        (403, "the model API refused the credentials (HTTP 403): check ANTHROPIC_API_KEY"),
    ],
    ids=["connection_refused", "401", "403"],
)
def test_a_model_api_that_refuses_the_session_is_a_setup_error_that_stops_the_run_naming_the_cause(
    tmp_path, proj, db, claude_binary, api, cause
):
    add_tasks(db, WS, [{"key": "t", "title": "the task"}])
    model = ScriptedModel(lambda turn: [error(api, "permission_error" if api == 403 else "")] * 3)
    with contextlib.nullcontext() if api == "closed" else model:
        url = f"http://127.0.0.1:{closed_port()}" if api == "closed" else model.url
        done = run(db, WS, proj, runner_env(tmp_path / "home", url), claude=claude_binary)
    assert done.returncode == 5, done.stdout + done.stderr
    assert f"3 setup errors in a row: stopping ({cause}" in done.stdout, done.stdout
    assert [r["outcome"] for r in sessions(db, WS)] == ["setup_error"] * 3
    task = board(db, WS)["t"]
    assert (task["status"], task["attempts"]) == ("pending", 0), task  # the environment's fault: never counted
    assert cause in json.dumps(task["context"])  # the note says what to check


def test_a_killed_session_is_crashed_and_ctrl_c_stops_the_rest_cleanly(tmp_path, proj, db, claude_binary):
    pids, wrapper = pid_wrapper(tmp_path, claude_binary)
    add_tasks(db, WS, [{"key": "k", "title": "killed", "priority": 1}, {"key": "c", "title": "never started"}])
    with ScriptedModel(lambda turn: [load("update_task"), stall(120)]) as model:
        env = runner_env(tmp_path / "home", model.url)
        runner = subprocess.Popen(
            runner_command(db, WS, claude=wrapper),
            cwd=proj,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        try:
            _wait_for(lambda: len(model.conversation()) >= 2, 60)  # the first session is talking
            os.kill(int(pids.read_text().split()[0]), signal.SIGKILL)
            _wait_for(lambda: len(pids.read_text().split()) >= 2 and len(model.sessions()) >= 2, 60)
            _wait_for(lambda: len(model.conversation(model.sessions()[1])) >= 2, 60)
            runner.send_signal(signal.SIGINT)
            out, err = runner.communicate(timeout=60)
        finally:
            runner.kill()
    assert runner.returncode == 130, out + err
    ended = [(r["task_key"], r["outcome"]) for r in sorted(sessions(db, WS), key=lambda r: r["started_at"])]
    assert ended == [("k", "crashed"), ("k", "stopped")], out  # the killed session's task was claimable at once
    tasks = board(db, WS)
    assert tasks["k"]["attempts"] == 2 and tasks["k"]["ready"], tasks["k"]  # settled, each attempt counted
    assert tasks["c"].get("attempts", 0) == 0 and tasks["c"]["ready"]
    assert "ended crashed" in json.dumps(tasks["k"]["context"])
    assert "cost" in out.splitlines()[-1]  # the summary


def test_a_gate_waits_for_a_person_and_the_run_goes_on_after_the_approval(tmp_path, proj, db, claude_binary):
    add_tasks(
        db,
        WS,
        [
            {"key": "build", "title": "build it"},
            {"key": "ok", "title": "a person checks the build", "kind": "gate", "depends_on": ["build"]},
            {"key": "ship", "title": "ship it", "depends_on": ["ok"]},
        ],
    )
    with ScriptedModel(completes) as model:
        env = runner_env(tmp_path / "home", model.url)
        runner = subprocess.Popen(
            runner_command(db, WS, claude=claude_binary),
            cwd=proj,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        try:
            lines = []
            while True:
                line = runner.stdout.readline()
                assert line, "".join(lines)
                lines.append(line)
                if "waiting" in line:
                    break
            assert "waiting_on_review" in line and "ok" in line, line
            time.sleep(1)  # the runner's row says what it waits on within a moment of saying so
            status = run_cli("status", "--json", "--db", db, "--workspace", WS, env=subprocess_env())
            (live,) = json.loads(status.stdout)["runners"]  # people see the live runner and its wait
            assert live["pid"] == runner.pid and "waiting_on_review" in (live["waiting"] or ""), live
            text = run_cli("status", "--db", db, "--workspace", WS, env=subprocess_env()).stdout
            assert f"runner {live['id']}" in text, text
            approved = run_cli("review", "approve", "ok", "--db", db, "--workspace", WS, env=subprocess_env())
            assert approved.returncode == 0, approved.stderr
            out, _ = runner.communicate(timeout=120)
        finally:
            runner.kill()
    assert runner.returncode == 0, "".join(lines) + out
    assert sum("waiting" in x for x in [*lines, *out.splitlines()]) == 1  # said once
    assert {k: t["status"] for k, t in board(db, WS).items()} == {"build": "done", "ok": "done", "ship": "done"}


def test_exit_when_idle_exits_3_at_a_gate_and_no_task_without_a_spec_exits_2(tmp_path, proj, db, claude_binary):
    with ScriptedModel(completes) as model:
        env = runner_env(tmp_path / "home", model.url)
        empty = run(db, WS, proj, env, claude=claude_binary)
        assert empty.returncode == 2 and "--spec" in empty.stdout, empty.stdout + empty.stderr
        add_tasks(
            db, WS, [{"key": "g", "title": "decide", "kind": "gate"}, {"key": "x", "title": "x", "depends_on": ["g"]}]
        )
        idle = run(db, WS, proj, env, "--exit-when-idle", claude=claude_binary)
    assert idle.returncode == 3, idle.stdout + idle.stderr
    assert "waiting_on_review" in idle.stdout and not sessions(db, WS)  # never a session for nothing
    # the wait names what a person runs
    assert "`mcp-harness review approve g` or `mcp-harness review reject g --comment ...`" in idle.stdout
    add_tasks(db, "f", [{"key": "broke", "title": "fails"}, {"key": "after", "title": "then", "depends_on": ["broke"]}])

    async def fail(h):
        who = Identity("f", "someone")
        claim = await h.tasks.claim(who, ClaimTaskArgs())
        action = UpdateTaskArgs(task_key="broke", action="fail", lease_token=claim.lease.token, error="x", retry=False)
        await h.tasks.update(who, action)

    harness_do(db, fail)
    with ScriptedModel(completes) as model:
        blocked = run(db, "f", proj, runner_env(tmp_path / "home", model.url), "--exit-when-idle", claude=claude_binary)
    assert blocked.returncode == 3, blocked.stdout + blocked.stderr
    assert "blocked_by_failure on broke (failed)" in blocked.stdout, blocked.stdout
    assert "`mcp-harness tasks reopen broke --reason ...`" in blocked.stdout


def test_an_initializer_session_plans_the_work_from_a_spec_then_the_sessions_do_it(tmp_path, proj, db, claude_binary):
    spec = tmp_path / "spec.md"
    spec.write_text("Build a greeter: a function and its test.\n")

    def script(turn):
        if "initializer session" in turn.prompt():
            plan = [
                {"key": "code", "title": "write greet()"},
                {"key": "test", "title": "test it", "depends_on": ["code"]},
            ]
            return [
                load("add_tasks", "save_checkpoint"),
                tool("add_tasks", {"tasks": plan}),
                tool("save_checkpoint", {"state": {"plan": ["code", "test"]}}),
                say("Planned two tasks."),
            ]
        return completes(turn)

    with ScriptedModel(script) as model:
        done = run(db, WS, proj, runner_env(tmp_path / "home", model.url), "--spec", str(spec), claude=claude_binary)
    assert done.returncode == 0, done.stdout + done.stderr
    records = sorted(sessions(db, WS), key=lambda r: r["started_at"])
    assert [(r["kind"], r["task_key"], r["outcome"]) for r in records] == [
        ("initializer", None, "completed"),
        ("work", "code", "completed"),
        ("work", "test", "completed"),
    ]
    assert str(spec) in model.conversation(records[0]["id"])[0].body["messages"][0]["content"][-1]["text"]


def test_budgets_stop_the_run_and_a_person_adds_tasks_from_the_command_line(tmp_path, proj, db, claude_binary):
    env = subprocess_env()
    for key in ("one", "two", "three", "four"):  # work remains after each run: a budget, not all done
        added = run_cli(
            "tasks", "add", key, "--title", f"task {key}", "--step", "it works", "--db", db, "--workspace", WS, env=env
        )
        assert added.returncode == 0 and f"added 1 task(s): {key}" in added.stdout, added.stderr
    with ScriptedModel(completes) as model:
        env = runner_env(tmp_path / "home", model.url)
        done = run(db, WS, proj, env, "--max-sessions", "2", claude=claude_binary)
        assert done.returncode == 4, done.stdout + done.stderr
        assert "budget reached (--max-sessions 2)" in done.stdout
        costly = run(db, WS, proj, env, "--max-cost", "0.001", claude=claude_binary)
    assert costly.returncode == 4 and "--max-cost" in costly.stdout, costly.stdout
    assert len(sessions(db, WS)) == 3
    assert board(db, WS)["one"]["added_by"] not in (None, "")


def test_a_budget_reached_by_the_session_that_finished_the_plan_ends_as_all_done(tmp_path, proj, db, claude_binary):
    add_tasks(db, WS, [{"key": "only", "title": "the one task"}])
    with ScriptedModel(completes) as model:
        done = run(db, WS, proj, runner_env(tmp_path / "home", model.url), "--max-sessions", "1", claude=claude_binary)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "all tasks are done" in done.stdout and "(exit 0)" in done.stdout.splitlines()[-1], done.stdout
    assert "budget reached" not in done.stdout, done.stdout  # all done is the one ending said
    assert board(db, WS)["only"]["status"] == "done"


def test_parallel_slots_work_in_their_own_worktrees_and_work_left_behind_is_committed(
    tmp_path, proj, db, claude_binary
):
    add_tasks(db, WS, [{"key": f"t{n}", "title": f"write file {n}", "paths": [f"t{n}.txt"]} for n in (1, 2)])

    def script(turn):
        key, token = task_of(turn)
        return [
            load("update_task"),
            tool("Bash", {"command": f"echo {key} > {key}.txt && pwd", "description": "write the file"}),
            say(f"wrote {key}.txt but did not finish"),
        ]

    with ScriptedModel(script) as model:
        env = runner_env(tmp_path / "home", model.url)
        done = run(
            db,
            WS,
            proj,
            env,
            "--parallel",
            "2",
            "--worktrees",
            "--max-sessions",
            "2",
            "--",
            "--allowedTools",
            "Bash",
            claude=claude_binary,
        )
    assert done.returncode == 4, done.stdout + done.stderr
    records = sessions(db, WS)
    assert sorted(r["slot"] for r in records) == [1, 2] and all(r["outcome"] == "no_progress" for r in records)
    status = subprocess.run(["git", "status", "--porcelain"], cwd=proj, capture_output=True, text=True).stdout
    assert status == "", status  # the main checkout is never touched
    for record in records:
        slot = record["slot"]
        branch = f"harness/slot-{slot}"
        log = subprocess.run(["git", "log", "-1", "--format=%s", branch], cwd=proj, capture_output=True, text=True)
        assert f"work in progress of {record['id']} (no_progress)" in log.stdout, log.stdout
        shown = subprocess.run(
            ["git", "show", "--name-only", "--format=", branch], cwd=proj, capture_output=True, text=True
        )
        assert f"{record['task_key']}.txt" in shown.stdout
        entry = [e for e in progress_of(db, WS) if e["task_key"] == record["task_key"]][0]
        assert "committed as" in entry["details"] and f"harness/slot-{slot}" in entry["details"]
        # the settling's note names what the session left uncommitted in its worktree, before the commit
        notes = [e["summary"] for e in progress_of(db, WS, "harness") if e["task_key"] == record["task_key"]]
        (ended,) = [n for n in notes if n.startswith("the lease of")]
        where = proj / ".mcp-harness" / "worktrees" / f"slot-{slot}"
        assert f"uncommitted under its paths in {where}: ?? {record['task_key']}.txt" in ended, ended
    excluded = (proj / ".git" / "info" / "exclude").read_text()
    assert "/.mcp-harness/" in excluded


def test_a_command_template_runs_any_agent_without_a_shell(tmp_path, proj, db):
    agent = tmp_path / "agent.py"
    agent.write_text(
        "import json, os, sys\n"
        "json.dump({'argv': sys.argv[1:], 'task': os.environ['MCP_HARNESS_TASK'],"
        " 'token': os.environ['MCP_HARNESS_LEASE_TOKEN'], 'session': os.environ['MCP_HARNESS_SESSION']},"
        f" open({str(tmp_path / 'seen.json')!r}, 'w'))\n"
        "print('I read the task and stopped.')\n"
    )
    title = 'x"; rm -rf ~; "'
    add_tasks(db, WS, [{"key": "inj", "title": title}])
    template = f"{sys.executable} {agent} {{prompt_file}} --title-of {{task_key}} {{prompt}}"
    done = subprocess.run(
        runner_command(db, WS, "--command", template, "--max-sessions", "1"),
        cwd=proj,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 4, done.stdout + done.stderr
    seen = json.loads((tmp_path / "seen.json").read_text())
    assert seen["argv"][1:3] == ["--title-of", "inj"] and len(seen["argv"]) == 4  # the prompt: one argument
    assert json.dumps(title) in seen["argv"][3]  # the title as quoted data
    assert seen["task"] == "inj" and seen["token"] and seen["session"]
    (record,) = sessions(db, WS)
    assert (
        record["outcome"] == "no_progress" and record["agent"] == f"{Path(sys.executable).name}:{seen['session'][:8]}"
    )
    assert record["last_words"] == "I read the task and stopped." and record["cost_usd"] is None


def pid_wrapper(tmp_path: Path, claude_binary: Path) -> tuple[Path, Path]:
    """A `claude` that writes its pid (the session's process group) to a file, then is the real one."""
    pids, wrapper = tmp_path / "pids", tmp_path / "claude-pid"
    wrapper.write_text(f'#!/bin/sh\necho $$ >> {pids}\nexec {claude_binary} "$@"\n')
    wrapper.chmod(0o755)
    return pids, wrapper


def _wait_for(condition, seconds: float) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        try:
            if condition():
                return
        except (OSError, ValueError, IndexError):
            pass
        time.sleep(0.1)
    raise AssertionError("timed out waiting")


def test_two_runners_on_one_postgresql_database_never_run_a_task_twice(tmp_path, proj, postgres_url, claude_binary):
    workspace = f"two-{os.getpid()}"
    keys = [f"t{n}" for n in range(6)]
    add_tasks(postgres_url, workspace, [{"key": k, "title": f"task {k}"} for k in keys])
    with ScriptedModel(completes) as model:
        env = runner_env(tmp_path / "home", model.url)
        runners = [
            subprocess.Popen(
                runner_command(postgres_url, workspace, claude=claude_binary),
                cwd=proj,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for _ in range(2)
        ]
        try:
            outs = [r.communicate(timeout=240)[0] for r in runners]
        finally:
            for r in runners:
                r.kill()
    assert [r.returncode for r in runners] == [0, 0], outs
    records = sessions(postgres_url, workspace)
    assert sorted(r["task_key"] for r in records) == keys  # one session per task, none twice
    assert {r["outcome"] for r in records} == {"completed"}
    assert len({r["runner"] for r in records}) == 2, outs  # both runners worked
    for key in keys:
        completes_of = [e for e in story(postgres_url, workspace, key)["events"] if e["kind"] == "complete"]
        assert len(completes_of) == 1, (key, completes_of)


def test_a_dry_run_says_what_would_run_and_starts_nothing(tmp_path, proj, db):
    add_tasks(db, WS, [{"key": "a", "title": "first"}])
    done = subprocess.run(
        runner_command(db, WS, "--dry-run", "--claude", "/bin/true"),
        cwd=proj,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "1 task(s) ready now: a" in done.stdout, done.stdout + done.stderr
    assert not sessions(db, WS) and board(db, WS)["a"]["status"] == "pending"


def test_a_dry_run_without_claude_code_still_shows_the_work_then_says_what_is_missing(tmp_path, proj, db):
    add_tasks(db, WS, [{"key": "a", "title": "first"}])
    env = {**subprocess_env(), "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"}
    env.pop("MCP_HARNESS_CLAUDE", None)
    done = subprocess.run(
        runner_command(db, WS, "--dry-run"), cwd=proj, env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 2 and "1 task(s) ready now: a" in done.stdout, done.stdout + done.stderr
    assert "no session could start: Claude Code's `claude` is not on PATH" in done.stderr
    assert "Traceback" not in done.stderr and not sessions(db, WS)


def test_a_runner_killed_outright_is_noticed_by_another_which_settles_its_session(tmp_path, proj, db, claude_binary):
    pids, wrapper = pid_wrapper(tmp_path, claude_binary)
    # a second task stays open: the survivor's one session ends at its budget (exit 4), not all done
    add_tasks(db, WS, [{"key": "t", "title": "the task"}, {"key": "later", "title": "after it", "priority": -1}])
    first: list[str] = []

    def script(turn):
        if not first or first[0] == turn.session:
            first.append(turn.session)
            return [load("update_task"), stall(300)]
        return completes(turn)

    with ScriptedModel(script) as model:
        env = runner_env(tmp_path / "home", model.url)
        dead = subprocess.Popen(runner_command(db, WS, claude=wrapper), cwd=proj, env=env, stdout=subprocess.DEVNULL)
        try:
            _wait_for(lambda: len(model.conversation()) >= 2, 60)
            dead.kill()  # the runner dies; its session's process lives on, hung
            dead.wait()
            (open_,) = sessions(db, WS)  # at once, not after the runner's renewals: its process is gone
            assert open_["outcome"] is None and open_["runner_gone"] is True, open_
            shown = run_cli("sessions", "--db", db, "--workspace", WS, env=env)
            assert "running, runner gone" in shown.stdout, shown.stdout + shown.stderr
            began = time.monotonic()
            survivor = run(db, WS, proj, env, "--max-sessions", "1", claude=wrapper, timeout=180)
            took = time.monotonic() - began
        finally:
            dead.kill()
            for pid in pids.read_text().split():
                try:
                    os.killpg(int(pid), signal.SIGKILL)
                except OSError:
                    pass
    assert survivor.returncode == 4, survivor.stdout + survivor.stderr
    assert "of a dead runner settled (crashed)" in survivor.stdout
    orphan = int(pids.read_text().split()[0])
    assert not Path(f"/proc/{orphan}").exists() or "Z" in Path(f"/proc/{orphan}/stat").read_text().split()[2], (
        "the dead runner's session still runs beside the survivor's"
    )
    ended = [(r["task_key"], r["outcome"]) for r in sorted(sessions(db, WS), key=lambda r: r["started_at"])]
    assert ended == [("t", "crashed"), ("t", "completed")], survivor.stdout
    crashed = sorted(sessions(db, WS), key=lambda r: r["started_at"])[0]
    entries = [p for p in story(db, WS, "t")["progress"] if p["agent"] == "runner"]
    assert any(p["summary"].startswith(f"session {crashed['id'][:8]}: crashed") for p in entries), entries
    assert took < 120  # the dead runner's lease did not have to run out
    assert board(db, WS)["t"]["status"] == "done"


def test_a_session_that_cannot_be_set_up_gives_its_task_back(tmp_path, db):
    bare = tmp_path / "fresh"
    bare.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=bare, check=True)  # no first commit: no worktree can be made
    add_tasks(db, WS, [{"key": "t", "title": "the task"}])
    done = subprocess.run(
        runner_command(db, WS, "--parallel", "2", "--worktrees", "--claude", "/bin/true"),
        cwd=bare,
        env=subprocess_env(),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 5, done.stdout + done.stderr
    assert "could not start a session on t: --worktrees needs a repository with a first commit" in done.stdout
    assert "Traceback" not in done.stderr
    task = board(db, WS)["t"]
    assert (task["status"], task["attempts"]) == ("pending", 0)


def test_parallel_slots_with_exit_when_idle_wait_for_their_own_sessions(tmp_path, proj, db, claude_binary):
    add_tasks(db, WS, [{"key": "a", "title": "first"}, {"key": "b", "title": "then", "depends_on": ["a"]}])
    with ScriptedModel(completes) as model:
        env = runner_env(tmp_path / "home", model.url)
        done = run(db, WS, proj, env, "--parallel", "2", "--exit-when-idle", claude=claude_binary)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "waiting" not in done.stdout  # its own claim is nothing to wait on
    assert {k: t["status"] for k, t in board(db, WS).items()} == {"a": "done", "b": "done"}


def test_a_review_task_completed_is_in_review_and_extra_claims_go_back(tmp_path, proj, db, claude_binary):
    add_tasks(
        db,
        WS,
        [{"key": "r", "title": "needs a look", "review": True, "priority": 5}, {"key": "x", "title": "another"}],
    )

    def script(turn):
        key, token = task_of(turn)
        if key == "r":
            return [load("claim_task"), tool("claim_task", {"task_key": "x"}), *completes(turn)[1:]]
        return completes(turn)

    with ScriptedModel(script) as model:
        env = runner_env(tmp_path / "home", model.url)
        done = run(db, WS, proj, env, "--max-sessions", "1", claude=claude_binary)
    assert done.returncode == 4, done.stdout + done.stderr
    (record,) = sessions(db, WS)
    assert record["outcome"] == "in_review", record
    assert "had claimed x too: given back" in done.stdout
    x = board(db, WS)["x"]
    assert (x["status"], x.get("attempts", 0), x["ready"]) == ("pending", 0, True), x


def test_a_429_that_a_retry_got_past_is_not_a_rate_limit(tmp_path, proj, db, claude_binary):
    add_tasks(db, WS, [{"key": "t", "title": "the task"}])
    with ScriptedModel(lambda turn: [error(429, **{"retry-after": "0"}), say("Only talking.")]) as model:
        env = runner_env(tmp_path / "home", model.url, CLAUDE_CODE_MAX_RETRIES="1")
        done = run(db, WS, proj, env, "--max-sessions", "1", claude=claude_binary)
    (record,) = sessions(db, WS)
    assert record["outcome"] == "no_progress", (record, done.stdout)
    assert "rate limited" not in done.stdout


def test_in_a_project_set_up_by_init_the_runner_says_why_a_lease_ended(tmp_path, proj, db, claude_binary):
    subprocess.run(
        [sys.executable, "-m", "mcp_harness", "init", "--db", db, "--workspace", WS],
        cwd=proj,
        check=True,
        capture_output=True,
    )
    add_tasks(db, WS, [{"key": "t", "title": "the task"}])
    with ScriptedModel(lambda turn: [say("I only looked.")]) as model:
        done = run(db, WS, proj, runner_env(tmp_path / "home", model.url), "--max-sessions", "1", claude=claude_binary)
    assert done.returncode == 4, done.stdout + done.stderr
    ends = [e["detail"]["reason"] for e in story(db, WS, "t")["events"] if e["kind"] == "lease_end"]
    assert len(ends) == 1 and ends[0].startswith("runner: session") and "ended no_progress" in ends[0], ends
