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

from mcp_harness.cli.guard import advice, check
from mcp_harness.quick_read import Reserved

pytestmark = pytest.mark.anyio


def git(cwd: Path, *args: str) -> str:
    out = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, check=True, env=_git_env())
    return out.stdout


def _git_env() -> dict[str, str]:
    return subprocess_env(
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@x",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@x",
        GIT_CONFIG_GLOBAL="/dev/null",
    )


def repo(path: Path) -> Path:
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    (path / "README.md").write_text("x\n")
    git(path, "add", ".")
    git(path, "commit", "-qm", "start")
    return path


def guard(cwd: Path, db: str, workspace: str, agent: str) -> subprocess.CompletedProcess:
    env = subprocess_env(MCP_HARNESS_AGENT=agent, MCP_HARNESS_NO_SESSION="1")
    return subprocess.run(
        [sys.executable, "-m", "mcp_harness", "guard", "--db", db, "--workspace", workspace],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def test_check_names_holder_task_and_pattern():
    at = time.time()
    held = [Reserved("api", "alice", "src/api/", at + 600), Reserved("mine", "bob", "docs/", at + 600)]
    [clash] = check(["src/api/x.py", "docs/a.md", "src/other.py"], held, "bob")
    line = clash.line(at)
    assert "src/api/x.py" in line and "'alice'" in line and "'api'" in line
    assert "'src/api/'" in line and "10m" in line


def test_a_folder_pattern_holds_the_plain_path_of_its_name():
    at = time.time()
    held = [Reserved("deps", "alice", "vendor/lib/", at + 600), Reserved("ui", "alice", "assets/**", at + 600)]
    clashes = check(["vendor/lib", "assets", "vendor/library", "assetsx", "vendor/lib/a.c"], held, "bob")
    assert {c.pattern: c.paths for c in clashes} == {
        "vendor/lib/": ["vendor/lib", "vendor/lib/a.c"],
        "assets/**": ["assets"],
    }


def test_a_large_commit_is_one_line_per_holder_task_and_pattern():
    at = time.time()
    held = [
        Reserved("api", "alice", "src/api/**", at + 600),
        Reserved("web", "carol", "web/", at + 90),
        Reserved("api", "alice", "tests/api/", at + 600),
    ]
    files = [f"src/api/f{i}.py" for i in range(1000)] + ["web/index.html", "tests/api/t.py", "free.md"]
    clashes = check(files, held, "bob")
    lines = [c.line(at) for c in clashes]
    assert len(lines) == 3 and sum(len(c.paths) for c in clashes) == 1002
    assert lines[0].startswith(
        "  reserved by agent 'alice' (task 'api', pattern 'src/api/**') for 10m more: "
        "1000 files, e.g. src/api/f0.py, src/api/f1.py, src/api/f2.py"
    )
    assert "src/api/f3.py" not in lines[0] and len(lines[0]) < 200
    assert lines[1].endswith("(task 'web', pattern 'web/') for 1m more: web/index.html")
    assert lines[2].endswith("pattern 'tests/api/') for 10m more: tests/api/t.py")
    two = advice(clashes)
    assert 'to="HOLDER"' in two and "msg send --to HOLDER" in two  # two holders: no single name to give
    one = advice(clashes[:1])
    assert 'message(action="send", to="alice"' in one and "mcp-harness msg send --to alice BODY" in one
    assert "--no-verify" in one and "git merge --abort" in one


@pytest.mark.slow
async def test_a_folder_pattern_holds_a_submodule_or_a_symlink_of_its_name(tmp_path, db_url, workspace):
    """git stages a submodule and a symlink as one plain path (`vendor/lib`, `assets`), never as a folder:
    a folder pattern (`vendor/lib/`, `assets/`) holds that path as well as what is below it."""
    root = repo(tmp_path / "repo")
    async with mcp_client(db_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[{"key": "deps", "title": "deps", "paths": ["vendor/lib/", "assets/"]}])
        await call(a, "claim_task")
    head = git(root, "rev-parse", "HEAD").strip()
    git(root, "update-index", "--add", "--cacheinfo", f"160000,{head},vendor/lib")  # what `submodule add` stages
    (root / "elsewhere").mkdir()
    os.symlink("elsewhere", root / "assets")
    git(root, "add", "assets")
    assert set(git(root, "diff", "--cached", "--name-only").split()) == {"vendor/lib", "assets"}
    refused = guard(root, db_url, workspace, "bob")
    assert refused.returncode == 1, refused.stderr
    assert "pattern 'vendor/lib/'" in refused.stderr and "pattern 'assets/'" in refused.stderr, refused.stderr


@pytest.mark.slow
async def test_a_hostile_pattern_does_not_hold_up_a_commit(tmp_path, sqlite_url, workspace):
    """A pattern a backtracking match takes minutes on, against a long staged name: decided at once."""
    root = repo(tmp_path / "repo")
    async with mcp_client(sqlite_url, workspace, "alice") as a:
        await call(
            a,
            "add_tasks",
            tasks=[{"key": "t", "title": "t", "paths": ["src/tests/*?*?*?*?*?*?*?*?*?*Z", "*a*a*a*a*a*a*a*a*b"]}],
        )
        await call(a, "claim_task")
    (root / "src" / "tests").mkdir(parents=True)
    (root / "src" / "tests" / ("a" * 120)).write_text("x\n")
    (root / ("a" * 200)).write_text("x\n")
    git(root, "add", ".")
    started = time.perf_counter()
    passed = guard(root, sqlite_url, workspace, "bob")
    assert passed.returncode == 0 and time.perf_counter() - started < 10, passed.stderr
    (root / "src" / "tests" / ("a" * 120 + "Z")).write_text("x\n")
    git(root, "add", ".")
    refused = guard(root, sqlite_url, workspace, "bob")
    assert refused.returncode == 1 and "Z" in refused.stderr, refused.stderr


@pytest.mark.slow
async def test_the_guard_refuses_reserved_paths_in_a_repo_and_a_worktree(tmp_path, db_url, workspace):
    root = repo(tmp_path / "repo")
    async with mcp_client(db_url, workspace, "alice") as a:
        await call(
            a,
            "add_tasks",
            tasks=[
                {"key": "api", "title": "api", "paths": ["src/api/"]},
                {"key": "doc", "title": "doc", "paths": ["README.md"]},
            ],
        )
        got = await call(a, "claim_task", task_key="api")
        await call(a, "claim_task", task_key="doc")
        await call(
            a,
            "update_task",
            task_key="api",
            action="reserve",
            lease_token=got["lease"]["token"],
            paths=["docs/"],
            shared=True,
        )
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


def _init(cwd: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "mcp_harness", "init", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )


def _hook_env(**extra: str) -> dict[str, str]:
    return {
        **_git_env(),
        "MCP_HARNESS_NO_SESSION": "1",
        "MCP_HARNESS_AGENT": "bob",
        "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"],
        **extra,
    }


@pytest.mark.slow
async def test_init_guard_installs_chained_pre_commit_and_pre_merge_commit_hooks(tmp_path, sqlite_url, workspace):
    root = repo(tmp_path / "repo")
    hooks = root / ".git" / "hooks"
    hooks.mkdir(exist_ok=True)
    earlier = {name: f"#!/bin/sh\necho earlier-{name}-ran >&2\n" for name in ("pre-commit", "pre-merge-commit")}
    for name, text in earlier.items():
        (hooks / name).write_text(text)
        (hooks / name).chmod((hooks / name).stat().st_mode | stat.S_IXUSR)
    env = _hook_env()
    out = _init(root, env, "--guard", "--db", sqlite_url, "--workspace", workspace, "--no-instructions")
    assert out.returncode == 0, out.stderr
    for name in earlier:
        hook = (hooks / name).read_text()
        assert "mcp-harness:guard" in hook and workspace in hook and "guard" in hook
        assert (hooks / f"{name}.before-mcp-harness").read_text() == earlier[name]
    async with mcp_client(sqlite_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[{"key": "api", "title": "api", "paths": ["src/"]}])
        await call(a, "claim_task")
    (root / "src").mkdir()
    (root / "src" / "x.py").write_text("x\n")
    git(root, "add", ".")
    commit = subprocess.run(["git", "commit", "-qm", "x"], cwd=root, capture_output=True, text=True, env=env)
    assert commit.returncode != 0 and "earlier-pre-commit-ran" in commit.stderr and "'alice'" in commit.stderr

    # a merge that makes a commit is checked too (pre-merge-commit): the branch's src/x.py is alice's
    git(root, "checkout", "-qb", "side")
    assert subprocess.run(["git", "commit", "-qm", "x", "--no-verify"], cwd=root, env=env).returncode == 0
    git(root, "checkout", "-q", "main")
    (root / "other.txt").write_text("o\n")
    git(root, "add", "other.txt")
    assert subprocess.run(["git", "commit", "-qm", "other"], cwd=root, env=env).returncode == 0  # free: passes
    merge = subprocess.run(
        ["git", "merge", "-m", "merge side", "side"], cwd=root, capture_output=True, text=True, env=env
    )
    assert merge.returncode != 0, merge.stdout
    assert "earlier-pre-merge-commit-ran" in merge.stderr and "'alice'" in merge.stderr and "src/x.py" in merge.stderr
    assert git(root, "log", "-1", "--format=%s").strip() == "other"  # no merge commit was made
    git(root, "merge", "--abort")
    merged = subprocess.run(["git", "merge", "--no-verify", "-m", "merge side", "side"], cwd=root, env=env)
    assert merged.returncode == 0 and git(root, "log", "-1", "--format=%s").strip() == "merge side"

    removed = _init(root, env, "--remove")
    assert removed.returncode == 0, removed.stderr
    assert "pre-merge-commit: commit guard removed; the hook it chained is back" in removed.stdout
    for name, text in earlier.items():
        assert (hooks / name).read_text() == text
        assert not (hooks / f"{name}.before-mcp-harness").exists()


@pytest.mark.slow
async def test_init_guard_in_a_linked_worktree_keeps_the_shared_hook(tmp_path, sqlite_url, workspace):
    """All worktrees share one set of hooks: init in a worktree finds the main checkout's workspace and
    leaves an identical guard alone; one with other settings is reported and kept unless --force."""
    root = repo(tmp_path / "shop")
    tree = tmp_path / "wt3"
    git(root, "worktree", "add", "-q", str(tree), "-b", "side")
    env = _hook_env()
    assert _init(root, env, "--guard", "--db", sqlite_url, "--workspace", workspace).returncode == 0
    hooks = {name: root / ".git" / "hooks" / name for name in ("pre-commit", "pre-merge-commit")}
    installed = {name: path.read_text() for name, path in hooks.items()}
    assert all(f"--workspace {workspace}" in text for text in installed.values())

    for dry in (["--dry-run"], []):  # the worktree's init: the main checkout's workspace and database
        out = _init(tree, env, "--guard", *dry)
        assert out.returncode == 0, out.stderr
        assert f"Workspace {workspace!r} and its database: this folder is a linked worktree of {root}" in out.stdout
        assert out.stdout.count("the commit guard is already installed (unchanged)") == 2, out.stdout
        assert "would be installed" not in out.stdout and "guard installed" not in out.stdout
        assert {name: path.read_text() for name, path in hooks.items()} == installed
    served = json.loads((tree / ".mcp.json").read_text())["mcpServers"]["harness"]["args"]
    assert served[served.index("--workspace") + 1] == workspace and served[served.index("--db") + 1] == sqlite_url

    other = _init(tree, env, "--guard", "--workspace", "wt3")  # a guard with other settings: reported and kept
    assert other.returncode == 0, other.stderr
    assert (
        other.stdout.count(
            "a commit guard with other settings is there: kept; `mcp-harness init --guard --force` replaces it"
        )
        == 2
    ), other.stdout
    assert f"old: guard --db {sqlite_url} --workspace {workspace}" in other.stdout
    assert "new: guard --workspace wt3" in other.stdout
    assert {name: path.read_text() for name, path in hooks.items()} == installed
    dry = _init(tree, env, "--guard", "--workspace", "wt3", "--force", "--dry-run")
    assert (
        dry.stdout.count("commit guard would be replaced") == 2
        and hooks["pre-commit"].read_text() == installed["pre-commit"]
    )
    forced = _init(tree, env, "--guard", "--workspace", "wt3", "--force")
    assert forced.stdout.count("commit guard replaced") == 2, forced.stdout
    assert all("--workspace wt3" in path.read_text() for path in hooks.values())


@pytest.mark.slow
async def test_the_hook_runs_without_mcp_harness_on_the_path(tmp_path, sqlite_url, workspace):
    """git clients, IDEs and CI shells run hooks with a PATH of their own: the hook runs this install by
    its full path; with that gone too it says so in one line and lets the commit through (it refused
    every commit with `exec: mcp-harness: not found`). An earlier hook with the same settings is updated."""
    import shutil

    root = repo(tmp_path / "repo")
    out = _init(
        root, _hook_env(), "--guard", "--db", sqlite_url, "--workspace", workspace, "--no-hooks", "--no-instructions"
    )
    assert out.returncode == 0, out.stderr
    async with mcp_client(sqlite_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[{"key": "api", "title": "api", "paths": ["src/"]}])
        await call(a, "claim_task")
    bare = {**_git_env(), "MCP_HARNESS_NO_SESSION": "1", "MCP_HARNESS_AGENT": "bob", "PATH": "/usr/bin:/bin"}
    assert shutil.which("mcp-harness", path=bare["PATH"]) is None

    def commit(*files: str) -> subprocess.CompletedProcess:
        for name in files:
            (root / name).parent.mkdir(parents=True, exist_ok=True)
            (root / name).write_text(name + "\n")
        git(root, "add", *files)
        done = subprocess.run(
            ["git", "commit", "-qm", "c"], cwd=root, capture_output=True, text=True, env=bare, timeout=60
        )
        if done.returncode:
            git(root, "reset", "-q")
        return done

    refused = commit("src/x.py")
    assert refused.returncode == 1 and "'alice'" in refused.stderr and "not found" not in refused.stderr, refused
    assert commit("free.txt").returncode == 0
    hook = root / ".git" / "hooks" / "pre-commit"
    text = hook.read_text()
    hook.write_text(
        "\n".join("run=/nowhere/mcp-harness" if line.startswith("run=") else line for line in text.splitlines()) + "\n"
    )
    unchecked = commit("src/y.py")
    assert unchecked.returncode == 0, unchecked.stderr
    assert unchecked.stderr.count("\n") == 1 and "cannot run /nowhere/mcp-harness" in unchecked.stderr
    assert "the commit is not checked" in unchecked.stderr
    hook.write_text(
        f"#!/bin/sh\n# mcp-harness:guard\nexec mcp-harness guard --db {sqlite_url} --workspace {workspace}\n"
    )
    again = _init(
        root, _hook_env(), "--guard", "--db", sqlite_url, "--workspace", workspace, "--no-hooks", "--no-instructions"
    )
    assert "pre-commit: commit guard updated" in again.stdout and "other settings" not in again.stdout, again.stdout
    assert hook.read_text() == text


@pytest.mark.slow
def test_a_hook_is_never_moved_over_one_moved_aside_before(tmp_path, sqlite_url):
    root = repo(tmp_path / "repo")
    hooks = root / ".git" / "hooks"
    (hooks / "pre-commit").write_text("#!/bin/sh\necho theirs\n")
    (hooks / "pre-commit.before-mcp-harness").write_text("#!/bin/sh\necho older\n")
    out = _init(root, _hook_env(), "--guard", "--db", sqlite_url, "--workspace", "w", "--no-hooks", "--no-instructions")
    assert out.returncode == 0, out.stderr
    assert "pre-commit: a hook of another program is there and pre-commit.before-mcp-harness too: kept" in out.stdout
    assert (hooks / "pre-commit").read_text() == "#!/bin/sh\necho theirs\n"
    assert (hooks / "pre-commit.before-mcp-harness").read_text() == "#!/bin/sh\necho older\n"
    assert "mcp-harness:guard" in (hooks / "pre-merge-commit").read_text()  # the other hook is free: installed


@pytest.mark.slow
async def test_a_thousand_file_commit_is_refused_in_three_lines(tmp_path, sqlite_url, workspace):
    root = repo(tmp_path / "repo")
    (root / "src" / "api").mkdir(parents=True)
    for i in range(1000):
        (root / "src" / "api" / f"f{i:04}.py").write_text(f"x = {i}\n")
    git(root, "add", ".")
    async with mcp_client(sqlite_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[{"key": "api", "title": "api", "paths": ["src/api/**"]}])
        await call(a, "claim_task")
    refused = guard(root, sqlite_url, workspace, "bob")
    assert refused.returncode == 1
    header, line, hint = refused.stderr.splitlines()
    assert header == "mcp-harness guard: this commit touches paths other agents hold (you are 'bob'):"
    assert line.startswith("  reserved by agent 'alice' (task 'api', pattern 'src/api/**') for ")
    assert line.endswith("more: 1000 files, e.g. src/api/f0000.py, src/api/f0001.py, src/api/f0002.py")
    assert 'message(action="send", to="alice"' in hint and "mcp-harness msg send --to alice" in hint
    assert len(refused.stderr) < 800


@pytest.mark.slow
def test_an_unreadable_database_lets_the_commit_through(tmp_path):
    root = repo(tmp_path / "repo")
    (root / "a.txt").write_text("a\n")
    git(root, "add", "a.txt")
    out = guard(root, "postgresql+asyncpg://nobody@127.0.0.1:1/none", "w", "bob")
    assert out.returncode == 0 and "not checked" in out.stderr
    assert run_cli("guard", "--bogus").returncode == 2


@pytest.mark.slow
async def test_a_lock_on_the_reservations_lets_the_commit_through_within_seconds(tmp_path, postgres_url, workspace):
    """Another PostgreSQL connection holds a lock on the reservations (a migration, a stuck transaction):
    the guard says it cannot check, in one line, within a few seconds, and lets the commit through (it
    waited as long as the lock was held)."""
    import asyncpg

    root = repo(tmp_path / "repo")
    async with mcp_client(postgres_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[{"key": "api", "title": "api", "paths": ["src/"]}])
        await call(a, "claim_task")
    (root / "src").mkdir()
    (root / "src" / "x.py").write_text("x\n")
    git(root, "add", ".")
    holder = await asyncpg.connect(postgres_url.replace("postgresql+asyncpg://", "postgresql://"))
    try:
        locked = holder.transaction()
        await locked.start()
        await holder.execute("LOCK TABLE task_reservations IN ACCESS EXCLUSIVE MODE")
        started = time.perf_counter()
        unchecked = guard(root, postgres_url, workspace, "bob")
        took = time.perf_counter() - started
        await locked.rollback()
    finally:
        await holder.close()
    assert unchecked.returncode == 0 and took < 10, (took, unchecked.stderr)
    assert unchecked.stderr.count("\n") == 1 and "did not answer within 3 s" in unchecked.stderr, unchecked.stderr
    assert "the commit is not checked" in unchecked.stderr
    assert guard(root, postgres_url, workspace, "bob").returncode == 1  # the lock gone: checked, and refused


@pytest.mark.slow
async def test_a_guard_that_cannot_check_says_so_and_finds_the_project_itself(tmp_path, sqlite_url, workspace):
    """Every way the guard used to pass a commit unsaid (a fresh-eyes trial): a database file that does not
    exist, a workspace with no task in it; each is one stderr line and exit 0. Without --workspace it
    reads the project's .mcp.json, as every command does; a file name's control characters are escaped."""
    root = repo(tmp_path / "repo")
    async with mcp_client(sqlite_url, workspace, "alice") as a:
        await call(a, "add_tasks", tasks=[{"key": "api", "title": "api", "paths": ["src/"]}])
        await call(a, "claim_task", task_key="api")
    (root / "src").mkdir()
    (root / "src" / "nl\nhere.js").write_text("x\n")
    git(root, "add", ".")
    missing = guard(root, str(tmp_path / "nowhere.db"), workspace, "bob")
    assert missing.returncode == 0 and f"no database at {tmp_path / 'nowhere.db'}" in missing.stderr
    assert "the commit is not checked" in missing.stderr and missing.stderr.count("\n") == 1
    wrong = guard(root, sqlite_url, "nosuch", "bob")
    assert wrong.returncode == 0 and "workspace 'nosuch' has no task in" in wrong.stderr
    assert "the commit is not checked" in wrong.stderr
    db = sqlite_url.split(":///", 1)[1]
    entry = {"command": "mcp-harness", "args": ["serve", "--db", db, "--workspace", workspace]}
    (root / ".mcp.json").write_text(json.dumps({"mcpServers": {"harness": entry}}))
    env = subprocess_env(MCP_HARNESS_AGENT="bob", MCP_HARNESS_NO_SESSION="1")
    env.pop("MCP_HARNESS_WORKSPACE", None)
    env.pop("MCP_HARNESS_DB", None)
    found = subprocess.run(
        [sys.executable, "-m", "mcp_harness", "guard"], cwd=root, capture_output=True, text=True, env=env, timeout=60
    )
    assert found.returncode == 1 and "'alice'" in found.stderr and "'api'" in found.stderr, found.stderr
    assert "src/nl\\nhere.js" in found.stderr or "src/nl\\u000ahere.js" in found.stderr, found.stderr
    helped = run_cli("guard", "--help")
    assert helped.returncode == 0 and "--no-verify skips it" in helped.stdout and "project's .mcp.json" in helped.stdout
