"""The commit guard (`mcp-harness guard`) and `init --guard`, on real git repositories (and a worktree),
against reservations taken through the official MCP client, on SQLite and PostgreSQL."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest
from support import call, mcp_client, run_cli, subprocess_env

from mcp_harness.cli.guard import check
from mcp_harness.glance import Reserved

pytestmark = pytest.mark.anyio


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=_git_env())
    return out.stdout


def _git_env() -> dict[str, str]:
    return subprocess_env(GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@x", GIT_COMMITTER_NAME="t",
                          GIT_COMMITTER_EMAIL="t@x", GIT_CONFIG_GLOBAL="/dev/null")  # fmt: skip


def repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("x\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "start")
    return path


def guard(cwd: Path, db: str, workspace: str, agent: str) -> subprocess.CompletedProcess:
    env = subprocess_env(MCP_HARNESS_AGENT=agent, MCP_HARNESS_NO_SESSION="1")
    return subprocess.run([sys.executable, "-m", "mcp_harness", "guard", "--db", db, "--workspace", workspace],
                          cwd=cwd, capture_output=True, text=True, env=env, timeout=60)  # fmt: skip


def test_check_names_holder_task_and_pattern():
    at = time.time()
    held = [Reserved("api", "alice", "src/api/", at + 600), Reserved("mine", "bob", "docs/", at + 600)]
    lines = check(["src/api/x.py", "docs/a.md", "src/other.py"], held, "bob", at)
    assert len(lines) == 1 and "src/api/x.py" in lines[0] and "'alice'" in lines[0] and "'api'" in lines[0]
    assert "'src/api/'" in lines[0] and "10m" in lines[0]


@pytest.mark.slow
async def test_the_guard_refuses_reserved_paths_in_a_repo_and_a_worktree(tmp_path, db_url, workspace):
    root = repo(tmp_path / "repo")
    async with mcp_client(db_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[{"key": "api", "title": "api", "paths": ["src/api/"]},
                                          {"key": "doc", "title": "doc", "paths": ["README.md"]}])  # fmt: skip
        got = await call(a, "claim_task", task_key="api")
        await call(a, "claim_task", task_key="doc")
        await call(a, "update_task", task_key="api", action="reserve", lease_token=got["lease"]["token"],
                   paths=["docs/"], shared=True)  # fmt: skip
        (root / "src" / "api").mkdir(parents=True)
        (root / "src" / "api" / "x.py").write_text("print()\n")
        (root / "docs").mkdir()
        (root / "docs" / "a.md").write_text("a\n")
        git(root, "add", ".")
        refused = guard(root / "src", db_url, workspace, "bob")  # from a subfolder: paths are the tree's
        assert refused.returncode == 1, refused.stderr
        assert "src/api/x.py" in refused.stderr and "'alice'" in refused.stderr and "'api'" in refused.stderr
        assert "'src/api/'" in refused.stderr and "docs/a.md" not in refused.stderr  # shared: not refused
        assert "--no-verify" in refused.stderr and refused.stdout == ""
        assert guard(root, db_url, workspace, "alice").returncode == 0  # its own reservations never stop it
        status = run_cli("status", "--json", "--db", db_url, "--workspace", workspace)
        leases = {lease["task"]: lease for lease in json.loads(status.stdout)["live_leases"]}
        assert leases["api"]["paths"] == ["src/api/"] and leases["api"]["shared_paths"] == ["docs/"]
        assert "src/api/" in run_cli("status", "--db", db_url, "--workspace", workspace).stdout
        shown = run_cli("tasks", "show", "api", "--db", db_url, "--workspace", workspace).stdout
        assert 'held_paths: ["src/api/"]' in shown and 'shared_paths: ["docs/"]' in shown
        # a worktree: paths relative to its own root
        git(root, "commit", "-qm", "mine", "--no-verify")
        tree = tmp_path / "tree"
        git(root, "worktree", "add", "-q", str(tree), "-b", "side")
        (tree / "README.md").write_text("changed\n")
        git(tree, "add", "README.md")
        refused = guard(tree, db_url, workspace, "bob")
        assert refused.returncode == 1 and "README.md" in refused.stderr and "'doc'" in refused.stderr
        (tree / "free.txt").write_text("ok\n")
        git(tree, "reset", "-q", "README.md")
        git(tree, "add", "free.txt")
        assert guard(tree, db_url, workspace, "bob").returncode == 0


@pytest.mark.slow
async def test_init_guard_installs_a_chained_pre_commit_hook(tmp_path, sqlite_url, workspace):
    root = repo(tmp_path / "repo")
    hooks = root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    before = hooks / "pre-commit"
    before.write_text("#!/bin/sh\necho earlier-hook-ran >&2\n")
    before.chmod(before.stat().st_mode | stat.S_IXUSR)
    env = {**_git_env(), "MCP_HARNESS_NO_SESSION": "1", "MCP_HARNESS_AGENT": "bob",
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}  # fmt: skip
    out = subprocess.run([sys.executable, "-m", "mcp_harness", "init", "--guard", "--db", sqlite_url, "--workspace",
                          workspace, "--no-instructions"], cwd=root, capture_output=True, text=True, env=env,
                         timeout=60)  # fmt: skip
    assert out.returncode == 0, out.stderr
    hook = (hooks / "pre-commit").read_text()
    assert "mcp-harness:guard" in hook and workspace in hook and "guard" in hook
    assert (hooks / "pre-commit.before-mcp-harness").exists()
    async with mcp_client(sqlite_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[{"key": "api", "title": "api", "paths": ["src/"]}])
        await call(a, "claim_task")
    (root / "src").mkdir()
    (root / "src" / "x.py").write_text("x\n")
    git(root, "add", ".")
    commit = subprocess.run(["git", "commit", "-qm", "x"], cwd=root, capture_output=True, text=True, env=env)
    assert commit.returncode != 0 and "earlier-hook-ran" in commit.stderr and "'alice'" in commit.stderr
    assert subprocess.run(["git", "commit", "-qm", "x", "--no-verify"], cwd=root, env=env).returncode == 0
    removed = subprocess.run([sys.executable, "-m", "mcp_harness", "init", "--remove"], cwd=root,
                             capture_output=True, text=True, env=env, timeout=60)  # fmt: skip
    assert removed.returncode == 0, removed.stderr
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\necho earlier-hook-ran >&2\n"


@pytest.mark.slow
def test_an_unreadable_database_lets_the_commit_through(tmp_path):
    root = repo(tmp_path / "repo")
    (root / "a.txt").write_text("a\n")
    git(root, "add", "a.txt")
    out = guard(root, "postgresql+asyncpg://nobody@127.0.0.1:1/none", "w", "bob")
    assert out.returncode == 0 and "not checked" in out.stderr
    assert run_cli("guard", "--bogus").returncode == 2
