"""The real Claude Code CLI against a scripted model and the real harness: what the README promises a
Claude Code user, read from what the client itself sends and does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from support.claude_code import Conversation, environment, run_claude, trust
from support.runner import add_tasks, board, harness_do, progress_of, story
from support.scripted_model import ScriptedModel, Turn, load, say, tool

from mcp_harness.arguments import ClaimTaskArgs
from mcp_harness.service import Identity

pytestmark = pytest.mark.slow


def init_project(root: Path, db: Path) -> Path:
    project = root / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    subprocess.run(
        [sys.executable, "-m", "mcp_harness", "init", "--db", str(db)], cwd=project, check=True, capture_output=True
    )
    return project


def test_a_headless_session_can_call_the_harness_tools_after_init(tmp_path, claude_binary):
    project = init_project(tmp_path, tmp_path / "h.db")
    trust(tmp_path / "home", project)  # as a person's first interactive run does
    script = [load("restore_state"), tool("restore_state"), say("done")]
    with ScriptedModel(script) as model:
        run = run_claude(claude_binary, project, environment(tmp_path / "home", model.url), "start")
    assert run.server_status() == "connected", run.init.get("mcp_servers")
    results = run.tool_results()
    assert len(results) == 2, results
    text, is_error = results[1]
    assert not is_error, text
    assert json.loads(text)["you"]["agent"].startswith("claude-code:")
    assert not run.result.get("permission_denials"), run.result["permission_denials"]


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file of the project but git's own, byte for byte."""
    files = (p for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.relative_to(root).parts)
    return {str(p.relative_to(root)): p.read_bytes() for p in files}


def test_init_allows_the_tools_and_remove_restores_the_project_byte_for_byte(tmp_path, claude_binary):
    project = tmp_path / "proj"
    (project / ".claude").mkdir(parents=True)
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    own = {"permissions": {"allow": ["Bash(npm test)"]}, "model": "opus"}
    (project / ".claude" / "settings.json").write_text(json.dumps(own, indent=2) + "\n")  # as init writes JSON
    (project / "CLAUDE.md").write_text("# Notes\n\nUse pnpm.\n")
    before = snapshot(project)
    harness = [sys.executable, "-m", "mcp_harness", "init", "--db", str(tmp_path / "h.db")]
    done = subprocess.run(harness, cwd=project, capture_output=True, text=True, check=True)
    assert "allowed the 'harness' tools (permissions.allow: mcp__harness)" in done.stdout, done.stdout
    settings = json.loads((project / ".claude" / "settings.json").read_text())
    assert settings["permissions"]["allow"] == ["Bash(npm test)", "mcp__harness"] and settings["model"] == "opus"
    trust(tmp_path / "home", project)
    script = [load("restore_state"), tool("restore_state"), say("done")]
    with ScriptedModel(script) as model:
        run = run_claude(claude_binary, project, environment(tmp_path / "home", model.url), "start")
    assert [is_error for _, is_error in run.tool_results()] == [False, False], run.tool_results()
    again = subprocess.run(harness, cwd=project, capture_output=True, text=True, check=True)
    assert "already allowed (mcp__harness) (unchanged)" in again.stdout, again.stdout
    removed = subprocess.run([*harness[:4], "--remove"], cwd=project, capture_output=True, text=True, check=True)
    assert "removed the permission mcp__harness" in removed.stdout, removed.stdout
    assert snapshot(project) == before


WS = "proj"  #: the workspace `init` names after the project's folder


def agent_of(session: str) -> str:
    return f"claude-code:{session[:8]}"


def ready_project(tmp_path: Path) -> tuple[Path, str, Path]:
    """A project set up by `init`, trusted in a private HOME: (project, database, HOME)."""
    db = tmp_path / "h.db"
    project = init_project(tmp_path, db)
    trust(tmp_path / "home", project)
    return project, str(db), tmp_path / "home"


def claimed(turn: Turn) -> str:
    """The lease token of the session's claim (the last tool result)."""
    return turn.last_json()["lease"]["token"]


def test_inits_files_are_what_claude_code_reads_and_the_first_request_briefs_the_sessions_agent(
    tmp_path, claude_binary
):
    project, db, home = ready_project(tmp_path)
    add_tasks(db, WS, [{"key": "api", "title": "build the API"}])
    with ScriptedModel([say("hello")]) as model:
        run = run_claude(claude_binary, project, environment(home, model.url), "start")
    assert run.returncode == 0, run.stderr[-500:]
    # .mcp.json: the server is connected, its nine tools offered (deferred: ToolSearch loads them)
    assert run.server_status() == "connected", run.init.get("mcp_servers")
    assert len([t for t in run.init["tools"] if t.startswith("mcp__harness__")]) == 9, run.init["tools"]
    # .claude/settings.json: the hooks ran; the brief is the session's opening context
    (brief,) = run.hook_context("SessionStart:startup")
    me = agent_of(run.session)
    first = model.conversation(run.session)[0].text()
    assert me in brief and WS in brief and brief in first, first[:3000]
    assert "api" in brief and "build the API" in brief  # the pending task is in the brief
    # CLAUDE.md imports AGENTS.md, whose section reaches the model
    assert f"## Working memory: mcp-harness (workspace `{WS}`, MCP server `harness`)" in first
    assert "mcp__harness__claim_task" in first  # deferred names, listed for ToolSearch


def test_each_session_is_its_own_agent_and_a_resumed_session_the_same_again(tmp_path, claude_binary):
    project, db, home = ready_project(tmp_path)
    # a resumed session plays on: its history holds the loaded tool
    script = [load("restore_state"), tool("restore_state"), say("done"), tool("restore_state"), say("again")]
    runs = []
    with ScriptedModel(script) as model:
        env = environment(home, model.url)
        runs.append(run_claude(claude_binary, project, env, "start"))
        runs.append(run_claude(claude_binary, project, env, "start"))
        runs.append(run_claude(claude_binary, project, env, "go on", "--resume", runs[0].session))
    first, second, resumed = runs
    assert first.session != second.session and resumed.session == first.session
    hooks = ("SessionStart:startup", "SessionStart:startup", "SessionStart:resume")
    for run, hook in zip(runs, hooks, strict=True):
        me = agent_of(run.session)
        (brief,) = run.hook_context(hook)
        assert me in brief, brief
        text, is_error = run.tool_results()[-1]
        assert not is_error and json.loads(text)["you"]["agent"] == me, text  # the server: the same identity


def test_after_clear_the_hooks_and_the_shell_act_for_the_identity_of_the_sessions_server(tmp_path, claude_binary):
    # `/clear` in a live session (prompts on stdin, one process): Claude Code gives hooks, the shell and
    # the model a new session id while the session's MCP server goes on with its own, and its leases
    project, db, home = ready_project(tmp_path)
    add_tasks(db, WS, [{"key": "api", "title": "build the API"}])
    shell = {"command": "mcp-harness msg send --to ana 'Which port?'", "description": "ask ana"}
    scripts = iter(
        [
            [load("claim_task"), tool("claim_task"), say("working")],
            [load("restore_state"), tool("restore_state"), tool("Bash", shell), say("asked")],
        ]
    )
    env = environment(home, "")
    with ScriptedModel(lambda turn: next(scripts)) as model:
        env["ANTHROPIC_BASE_URL"] = model.url
        with Conversation(claude_binary, project, env, "--allowedTools", "Bash") as talk:
            before = talk.turn("start")
            me = agent_of(before.session)
            cleared = talk.turn("/clear")
            assert cleared.session != before.session  # hooks and the model now see another session id
            (brief,) = cleared.hook_context("SessionStart:clear")
            assert me in brief and agent_of(cleared.session) not in brief, brief  # the server's identity
            send = [sys.executable, "-m", "mcp_harness", "msg", "send", "--db", db, "--workspace", WS]
            subprocess.run([*send, "--agent", "ana", "--to", me, "Use port 8080."], check=True, capture_output=True)
            after = talk.turn("go on")  # the new session id's script, through the same server
            held = harness_do(db, lambda h: h.tasks.claim(Identity(WS, "bob"), ClaimTaskArgs()))
    assert held.task is None, held  # the lease lived on after /clear (SessionEnd leaves it alone then)
    restored, _ = after.tool_results()[-2]
    assert json.loads(restored)["you"]["agent"] == me, restored
    told = model.conversation(after.session)[0].since_answer()  # all of it: nothing was answered yet
    assert brief in told, told  # the brief after /clear, beside the next prompt
    assert "Use port 8080." in told, told  # UserPromptSubmit read the server's inbox
    (asked,) = harness_do(db, lambda h: h.messages.read(Identity(WS, "ana"))).messages
    assert (asked.from_, asked.body) == (me, "Which port?")  # the shell's msg resolves the same sender


def test_a_headless_session_claims_and_completes_a_task_with_the_harness_tools(tmp_path, claude_binary):
    project, db, home = ready_project(tmp_path)
    add_tasks(db, WS, [{"key": "api", "title": "build the API"}])
    complete = {"task_key": "api", "action": "complete", "verification": "ran the tests", "result": "built"}
    script = [
        load("claim_task", "update_task"),
        tool("claim_task"),
        tool("update_task", lambda turn: {**complete, "lease_token": claimed(turn)}),
        say("done"),
    ]
    with ScriptedModel(script) as model:
        run = run_claude(claude_binary, project, environment(home, model.url), "work")
    results = run.tool_results()
    assert [is_error for _, is_error in results] == [False, False, False], results
    assert not run.result.get("permission_denials"), run.result["permission_denials"]
    task = board(db, WS)["api"]
    assert (task["status"], task["owner"], task["result"]) == ("done", agent_of(run.session), "built"), task


def test_a_lease_ends_when_the_sessions_process_exits_and_the_next_claim_takes_it_at_once(tmp_path, claude_binary):
    project, db, home = ready_project(tmp_path)
    add_tasks(db, WS, [{"key": "api", "title": "build the API"}])
    script = [load("claim_task"), tool("claim_task"), say("I stop here.")]
    with ScriptedModel(script) as model:
        run = run_claude(claude_binary, project, environment(home, model.url), "work")
    assert json.loads(run.tool_results()[-1][0])["task"]["key"] == "api"
    holder = agent_of(run.session)
    task = board(db, WS)["api"]
    assert (task["status"], task["owner"]) == ("claimed", holder), task  # the holder named until a claim
    other = harness_do(db, lambda h: h.tasks.claim(Identity(WS, "bob"), ClaimTaskArgs()))
    assert other.task is not None and other.task.key == "api", other  # at once: its lease is 15 minutes
    told = json.dumps(story(db, WS, "api"))
    assert holder in told and "connection" in told, told


def test_a_message_is_told_at_the_next_prompt_and_only_once(tmp_path, claude_binary):
    project, db, home = ready_project(tmp_path)
    send = [sys.executable, "-m", "mcp_harness", "msg", "send", "--db", db, "--workspace", WS, "--agent", "ana"]
    with ScriptedModel([say("hello")]) as model:
        env = environment(home, model.url)
        with Conversation(claude_binary, project, env) as talk:  # a live session: UserPromptSubmit tells it
            first = talk.turn("start")
            me = agent_of(first.session)
            subprocess.run([*send, "--to", me, "Use port 8080."], check=True, capture_output=True)
            told = talk.turn("next")
            quiet = talk.turn("more")
        # a session resumed later: the message sent meanwhile comes with its next prompt, once
        subprocess.run([*send, "--to", me, "--subject", "db", "Use PostgreSQL."], check=True, capture_output=True)
        resumed = run_claude(claude_binary, project, env, "again", "--resume", first.session)
        later = run_claude(claude_binary, project, env, "and again", "--resume", first.session)
    requests = model.conversation(first.session)
    assert len(requests) == 5, [r.since_answer()[:200] for r in requests]
    assert "Use port 8080." not in requests[0].text()
    news = requests[1].since_answer()  # the prompt and what UserPromptSubmit added to it
    assert "Use port 8080." in news and "ana" in news, news
    assert "Use port 8080." not in requests[2].since_answer(), requests[2].since_answer()  # once
    assert requests[3].since_answer().count("Use PostgreSQL.") == 1, requests[3].since_answer()
    assert not told.result["is_error"] and not quiet.result["is_error"]
    assert not resumed.result["is_error"] and not later.result["is_error"]
    assert "Use PostgreSQL." not in requests[4].since_answer(), requests[4].since_answer()


def test_a_persons_release_is_told_at_the_next_prompt_and_only_once(tmp_path, claude_binary):
    project, db, home = ready_project(tmp_path)
    add_tasks(db, WS, [{"key": "api", "title": "build the API"}])
    script = [
        load("claim_task"),
        tool("claim_task"),
        say("working"),  # the first prompt
        say("noted"),  # the next: told of the release
        tool("claim_task"),
        say("claimed it again"),  # the one after: not told again; claims anew
        say("back"),
        say("still back"),  # resumed later, twice
    ]
    release = [sys.executable, "-m", "mcp_harness", "tasks", "release", "api", "--db", db, "--workspace", WS]
    with ScriptedModel(script) as model:
        env = environment(home, model.url)
        with Conversation(claude_binary, project, env) as talk:  # a live session
            first = talk.turn("work")
            me = agent_of(first.session)
            assert board(db, WS)["api"]["owner"] == me
            subprocess.run(
                [*release, "--reason", "the spec changed", "--agent", "ana"], check=True, capture_output=True
            )
            talk.turn("go on")
            talk.turn("and on")
            assert board(db, WS)["api"]["owner"] == me
        # its lease ended with the process; a person releases the task it still names, then it resumes
        subprocess.run([*release, "--reason", "the API moves", "--agent", "ana"], check=True, capture_output=True)
        resumed = run_claude(claude_binary, project, env, "next", "--resume", first.session)
        later = run_claude(claude_binary, project, env, "and next", "--resume", first.session)
    requests = model.conversation(first.session)
    assert len(requests) == 8, len(requests)
    told = requests[3].since_answer()
    assert "api" in told and "the spec changed" in told and "ana" in told, told
    assert "the spec changed" not in requests[4].since_answer(), requests[4].since_answer()
    assert "the spec changed" in requests[3].hook_said("UserPromptSubmit")  # the hook, not another
    # resumed, the brief is what tells: its newest progress holds the harness's note of the release
    # (SessionStart starts the per-prompt hook's count anew); the next prompts say it no more
    assert "the API moves" in requests[6].hook_said("SessionStart"), requests[6].since_answer()
    assert "the API moves" not in requests[6].hook_said("UserPromptSubmit"), requests[6].since_answer()
    assert "the API moves" not in requests[7].hook_said("UserPromptSubmit"), requests[7].since_answer()
    assert not resumed.result["is_error"] and not later.result["is_error"]


def test_compact_writes_a_note_per_held_task_and_the_brief_after_it_restores_the_task(tmp_path, claude_binary):
    project, db, home = ready_project(tmp_path)
    steps = ["write the handler", "test it"]
    add_tasks(db, WS, [{"key": "api", "title": "build the API", "description": "REST, JSON", "steps": steps}])
    script = [load("claim_task"), tool("claim_task"), say("working"), say("back")]
    with ScriptedModel(script) as model, Conversation(claude_binary, project, environment(home, model.url)) as talk:
        first = talk.turn("work")
        compacted = talk.turn("/compact")
        talk.turn("go on")
    assert compacted.of("system", "compact_boundary"), [e.get("subtype") for e in compacted.events]
    assert [r for r in model.requests if r.compaction], "no summary was asked for"
    me = agent_of(first.session)
    notes = [e for e in progress_of(db, WS, "harness") if e["task_key"] == "api"]
    assert any("compacted" in e["summary"] and me in e["summary"] for e in notes), notes
    (brief,) = compacted.hook_context("SessionStart:compact")
    after = model.conversation(first.session)[-1].text()  # the first request after the compaction
    assert brief in after, after[-3000:]
    assert "compacted" in brief and "api" in brief and "REST, JSON" in brief and "test it" in brief, brief


def test_after_sessions_in_a_project_that_had_nothing_remove_leaves_it_as_it_was(tmp_path, claude_binary):
    project = tmp_path / "proj"
    project.mkdir()
    subprocess.run(["git", "init", "-q"], cwd=project, check=True)
    (project / "README").write_text("a project\n")
    before = snapshot(project), folders(project)
    harness = [sys.executable, "-m", "mcp_harness", "init", "--db", str(tmp_path / "h.db")]
    subprocess.run(harness, cwd=project, capture_output=True, check=True)
    trust(tmp_path / "home", project)
    add_tasks(str(tmp_path / "h.db"), WS, [{"key": "api", "title": "build the API"}])
    script = [load("claim_task"), tool("claim_task"), say("stopping")]
    with ScriptedModel(script) as model:  # every hook runs: start, prompt, end
        run = run_claude(claude_binary, project, environment(tmp_path / "home", model.url), "work")
    assert [is_error for _, is_error in run.tool_results()] == [False, False], run.tool_results()
    subprocess.run([*harness[:4], "--remove"], cwd=project, capture_output=True, check=True)
    assert (snapshot(project), folders(project)) == before


def folders(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_dir() and ".git" not in p.parts)


def test_a_brief_word_for_word_one_the_conversation_holds_is_not_sent_again(tmp_path, claude_binary):
    # what the README says of Claude Code: a second --resume with nothing changed adds no brief
    project, db, home = ready_project(tmp_path)
    with ScriptedModel([say("hello")]) as model:
        env = environment(home, model.url)
        first = run_claude(claude_binary, project, env, "start")
        runs = [run_claude(claude_binary, project, env, f"resume {n}", "--resume", first.session) for n in (1, 2)]
    briefs = [run.hook_context("SessionStart:resume") for run in runs]
    assert briefs[0] == briefs[1] and briefs[0][0], briefs  # the hook ran and said the same both times
    requests = model.conversation(first.session)
    assert briefs[0][0] in requests[1].hook_said("SessionStart"), requests[1].since_answer()
    assert requests[2].hook_said("SessionStart") == "", requests[2].since_answer()
