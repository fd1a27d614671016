"""Half-finished work is named: the note written when a lease ends without `complete` (a connection's end,
a dead process, a lease taken over after it ran out, the runner's settling) names the uncommitted and
untracked files under the task's `paths` (the whole work tree without them), at most 20, as `git status`
shows them in the repository the settling process runs in; nothing when it runs in none. Real git
repositories, real server processes and the MCP client against the real server."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from support import call, mcp_client, serve_command, settings_for, subprocess_env
from test_connection_leases import INIT, _answer, _send

from mcp_harness import clock
from mcp_harness.arguments import AddTasksArgs, ClaimTaskArgs
from mcp_harness.service import Harness, Identity
from mcp_harness.sessions import machine
from mcp_harness.tasks import work_tree

pytestmark = [pytest.mark.anyio, pytest.mark.slow]  # git runs in every test here

GONE = 2**22 + 7  # above the default pid_max: never a running process


def _repo(folder: Path) -> Path:
    """A repository with one commit (src/a.py, docs/x.md), then: src/a.py changed, src/new.py and
    notes.txt untracked, and a file whose name holds a newline and a quote."""
    folder.mkdir(parents=True, exist_ok=True)
    env = subprocess_env() | {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@t",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@t",
    }
    run = lambda *a: subprocess.run(["git", *a], cwd=folder, env=env, check=True, capture_output=True)  # noqa: E731
    run("init", "-q")
    (folder / "src").mkdir()
    (folder / "docs").mkdir()
    (folder / "src" / "a.py").write_text("a = 1\n")
    (folder / "docs" / "x.md").write_text("# x\n")
    run("add", ".")
    run("commit", "-q", "-m", "first")
    (folder / "src" / "a.py").write_text("a = 2\n")
    (folder / "src" / "new.py").write_text("b = 1\n")
    (folder / "notes.txt").write_text("outside the task's paths\n")
    (folder / "src" / 'odd\nname".py').write_text("")
    return folder


async def _plan(db_url: str, workspace: str, paths: list[str] | None = None) -> None:
    async with mcp_client(db_url, workspace, "planner") as planner:
        task = {"key": "a", "title": "A"} | ({"paths": paths} if paths else {})
        await call(planner, "add_tasks", tasks=[task])


async def _notes(db_url: str, workspace: str) -> list[str]:
    async with mcp_client(db_url, workspace, "reader") as reader:
        log = await call(reader, "restore_state", progress_limit=20)
    return [e["summary"] for e in log["recent_progress"] if e.get("task_key") == "a"]


def _serve(db_url: str, workspace: str, agent: str, cwd: Path) -> subprocess.Popen:
    command = [*serve_command(db_url, workspace, agent), "--no-session"]
    proc = subprocess.Popen(
        command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(), cwd=cwd
    )
    _send(proc, INIT)
    _answer(proc, 0)
    _send(proc, {"jsonrpc": "2.0", "method": "notifications/initialized"})
    _send(
        proc,
        {
            "jsonrpc": "2.0",
            "id": 1,
            "method": "tools/call",
            "params": {"name": "claim_task", "arguments": {"lease_seconds": 3600}},
        },
    )
    assert _answer(proc, 1)["result"]["structuredContent"]["task"]["key"] == "a"
    return proc


async def test_a_connections_end_names_the_files_under_the_tasks_paths(db_url, workspace, tmp_path):
    repo = _repo(tmp_path / "repo")
    await _plan(db_url, workspace, ["src/"])
    proc = _serve(db_url, workspace, "ann", cwd=repo / "docs")  # a subfolder: git answers from the top
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)
    (ended,) = [n for n in await _notes(db_url, workspace) if n.startswith("the lease of ann")]
    assert "\n" not in ended and f"uncommitted under its paths in {repo}:" in ended, ended
    assert "M src/a.py" in ended and "?? src/new.py" in ended, ended
    assert '?? "src/odd\\x0aname\\".py"' in ended, ended  # quoted: the name cannot break the note
    assert "notes.txt" not in ended and "docs/x.md" not in ended, ended


async def test_a_dead_process_and_a_take_over_name_the_whole_tree_without_paths(
    db_url, workspace, tmp_path, monkeypatch
):
    repo = _repo(tmp_path / "repo")
    monkeypatch.chdir(repo)  # the settling process (this one, through its in-process server) runs here
    await _plan(db_url, workspace)
    async with Harness.open(settings_for(db_url)) as h:
        dead = Identity(workspace, "ann", process=f"{machine()}/{GONE}-1")
        await h.tasks.claim(dead, ClaimTaskArgs(task_key="a", lease_seconds=10))
    async with mcp_client(db_url, workspace, "bob") as bob:
        taken = await call(bob, "claim_task")  # the look ends ann's lease, the claim takes it over
    assert taken["lease"]["attempt"] == 2, taken
    notes = await _notes(db_url, workspace)
    (ended,) = [n for n in notes if n.startswith("the lease of ann")]
    assert "its process ended" in ended and f"uncommitted in {repo}:" in ended, ended
    assert "notes.txt" in ended and "M src/a.py" in ended, ended  # no paths: the whole work tree
    (took,) = [n for n in notes if n.startswith("bob took over")]
    assert "notes.txt" in took, took

    clock.advance(3600 + 1)  # bob's lease runs out; cy takes it over (the claim's transaction path)
    async with mcp_client(db_url, workspace, "cy") as cy:
        again = await call(cy, "claim_task", idempotency_key="cy-1")
    assert again["lease"]["attempt"] == 3, again
    (took,) = [n for n in await _notes(db_url, workspace) if n.startswith("cy took over")]
    assert "the lease of bob expired; uncommitted in" in took and "?? src/new.py" in took, took


async def test_a_take_over_of_a_task_with_paths_lists_at_most_twenty(db_url, workspace, tmp_path, monkeypatch):
    repo = _repo(tmp_path / "repo")
    for i in range(25):
        (repo / "src" / f"f{i:02}.py").write_text("")
    monkeypatch.chdir(repo)
    await _plan(db_url, workspace, ["src/**/*.py"])
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "claim_task", lease_seconds=10)
    clock.advance(11)
    async with mcp_client(db_url, workspace, "bob") as bob:
        taken = await call(bob, "claim_task")
    assert taken["task"]["key"] == "a", taken
    (took,) = [n for n in await _notes(db_url, workspace) if n.startswith("bob took over")]
    named = took.split(": ", 2)[-1]
    assert named.count(", ") == 19 and "(+8 more)" in took, took  # 28 files under src/, 20 named
    assert "src/f24.py" not in took and "src/a.py" in took, took  # in git's order, the first 20


async def test_outside_a_repository_the_note_says_nothing_of_files(db_url, workspace, tmp_path, monkeypatch):
    plain = tmp_path / "plain"
    plain.mkdir()
    monkeypatch.chdir(plain)
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    await _plan(db_url, workspace)
    async with mcp_client(db_url, workspace, "ann") as ann:
        await call(ann, "claim_task", lease_seconds=10)
    clock.advance(11)
    async with mcp_client(db_url, workspace, "bob") as bob:
        await call(bob, "claim_task")
    (took,) = [n for n in await _notes(db_url, workspace) if n.startswith("bob took over")]
    assert took.endswith("the lease of ann expired"), took


async def test_a_clean_tree_says_so_and_git_failing_never_breaks_the_settling(db_url, workspace, tmp_path, monkeypatch):
    repo = _repo(tmp_path / "repo")
    async with Harness.open(settings_for(db_url)) as h:
        await h.tasks.add(
            Identity(workspace, "planner"), AddTasksArgs(tasks=[{"key": "a", "title": "A", "paths": ["lib/"]}])
        )
        ann = Identity(workspace, "ann")
        await h.tasks.claim(ann, ClaimTaskArgs(task_key="a"))
        assert await h.tasks.end_leases(ann, "its session ended (test)", cwd=repo) == ["a"]
        await h.tasks.add(Identity(workspace, "planner"), AddTasksArgs(tasks=[{"key": "b", "title": "B"}]))
        await h.tasks.claim(ann, ClaimTaskArgs(task_key="b"))
        monkeypatch.setenv("PATH", str(tmp_path / "nowhere"))  # no git at all
        assert await h.tasks.end_leases(ann, "its session ended (test)", cwd=repo) == ["b"]
        story = await h.tasks.story(Identity(workspace, "reader"), "a")
        later = await h.tasks.story(Identity(workspace, "reader"), "b")
    (ended,) = [p.summary for p in story.progress if p.summary.startswith("the lease of ann")]
    assert ended.endswith(f"git status in {repo}: nothing uncommitted under its paths"), ended
    (ended,) = [p.summary for p in later.progress if p.summary.startswith("the lease of ann")]
    assert ended.endswith("the next claim takes it at once"), ended


def test_names_are_data():
    assert work_tree.shown("??", "src/a b.py") == '?? "src/a b.py"'
    assert work_tree.shown(" M", "x\u2028y\x1b[31m") == 'M "x\\u2028y\\x1b[31m"'
    assert work_tree.shown("R ", "plain/name.py") == "R plain/name.py"
    raw = b" M src/a.py\0R  new.py\0old.py\0?? s p\xffc\0"
    assert work_tree.parse(raw) == [(" M", "src/a.py"), ("R ", "new.py"), ("??", "s p\udcffc")]
    assert work_tree.quoted("s p\udcffc") == '"s p\\udcffc"'  # an undecodable byte, escaped
