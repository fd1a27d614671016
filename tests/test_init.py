"""`mcp-harness init` in temporary projects (a fake HOME for Claude Desktop): each client's file
written and merged, idempotence, --force, the hook's command really printing the brief, the
instructions section written once."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from support import call, mcp_client, subprocess_env

pytestmark = pytest.mark.slow  # every test runs `mcp-harness init` in a process

BIN = str(Path(sys.executable).parent)  # this install's mcp-harness is on the PATH init sees


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "shop front"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def init(project: Path, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    environment = subprocess_env(
        HOME=str(project.parent / "home"), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", **env
    )
    environment.pop("XDG_CONFIG_HOME", None)
    return subprocess.run(
        [sys.executable, "-m", "mcp_harness", "init", *args],
        cwd=cwd or project,
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def read(path: Path) -> dict:
    return json.loads(path.read_text())


def snapshot(root: Path) -> dict[str, str]:
    """Every file of the project but git's own, with its content."""
    files = (p for p in sorted(root.rglob("*")) if p.is_file() and ".git" not in p.relative_to(root).parts)
    return {str(p.relative_to(root)): p.read_text() for p in files}


def test_each_client_file_is_written_and_merged_once(project):
    (project / ".cursor").mkdir()
    (project / ".cursor" / "mcp.json").write_text(json.dumps({"mcpServers": {"docs": {"command": "docs-server"}}}))
    (project / ".vscode").mkdir()
    (project / ".vscode" / "mcp.json").write_text(
        json.dumps({"servers": {"db": {"type": "stdio", "command": "x"}}, "inputs": []})
    )
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"web": {"type": "http", "url": "http://w"}}}))
    first = init(project, cwd=project / "src")  # from a subfolder: the git top level is the project
    assert first.returncode == 0, first.stderr
    code = read(project / ".mcp.json")["mcpServers"]
    assert code["web"] == {"type": "http", "url": "http://w"}  # other servers stay
    assert code["harness"] == {
        "type": "stdio",
        "command": "mcp-harness",  # by name: it is on PATH
        "args": ["serve", "--workspace", "shop-front", "--agent", "claude-code"],
    }
    cursor = read(project / ".cursor" / "mcp.json")["mcpServers"]
    assert cursor["docs"] == {"command": "docs-server"} and cursor["harness"]["args"][-1] == "cursor"
    vscode = read(project / ".vscode" / "mcp.json")
    assert vscode["inputs"] == [] and set(vscode["servers"]) == {"db", "harness"}
    assert vscode["servers"]["harness"]["type"] == "stdio" and vscode["servers"]["harness"]["args"][-1] == "vscode"
    assert "'mcp-harness' resolves to" in first.stdout
    assert "runs: mcp-harness serve --workspace shop-front" in first.stdout
    before = snapshot(project)
    again = init(project)
    assert again.returncode == 0 and snapshot(project) == before  # idempotent: nothing changes
    assert again.stdout.count("unchanged") == 7  # 3 servers, the hooks, the permission, the instructions, the import


def test_an_existing_different_entry_is_kept_unless_force(project):
    mine = {"mcpServers": {"harness": {"command": "/opt/old/mcp-harness", "args": ["serve"]}}}
    (project / ".mcp.json").write_text(json.dumps(mine))
    kept = init(project, "--no-hooks", "--no-instructions")
    assert (
        kept.returncode == 0
        and "exists with other settings: kept; `mcp-harness init --force` replaces it" in kept.stdout
    )
    old, new = [line.strip() for line in kept.stdout.splitlines() if line.strip().startswith(("old:", "new:"))]
    assert json.loads(old.removeprefix("old: ")) == mine["mcpServers"]["harness"]  # what differs, a line each
    assert json.loads(new.removeprefix("new: "))["args"] == [
        "serve",
        "--workspace",
        "shop-front",
        "--agent",
        "claude-code",
    ]
    assert read(project / ".mcp.json") == mine
    forced = init(project, "--no-hooks", "--no-instructions", "--force", "--workspace", "shop")
    assert forced.returncode == 0 and "replaced server 'harness'" in forced.stdout
    assert read(project / ".mcp.json")["mcpServers"]["harness"]["args"] == [
        "serve",
        "--workspace",
        "shop",
        "--agent",
        "claude-code",
    ]
    assert not (project / "AGENTS.md").exists()  # without hooks, Claude Code's settings hold the permission only
    assert read(project / ".claude" / "settings.json") == {"permissions": {"allow": ["mcp__harness"]}}


def test_claude_desktop_merges_into_the_users_config_after_a_backup(project):
    config = project.parent / "home" / ".config" / "Claude" / "claude_desktop_config.json"
    config.parent.mkdir(parents=True)
    original = json.dumps({"mcpServers": {"files": {"command": "fs"}}, "theme": "dark"})
    config.write_text(original)
    out = init(project, "--client", "claude-desktop", "--no-instructions")
    assert out.returncode == 0, out.stderr
    merged = read(config)
    assert merged["theme"] == "dark" and merged["mcpServers"]["files"] == {"command": "fs"}
    entry = merged["mcpServers"]["harness"]
    assert os.path.isabs(entry["command"])  # Desktop starts servers without a shell's PATH
    assert entry["args"][-4:] == ["--workspace", "shop-front", "--agent", "claude-desktop"]
    backups = list(config.parent.glob("claude_desktop_config.json.*.bak"))
    assert len(backups) == 1 and backups[0].read_text() == original and "old file is kept as" in out.stdout
    assert not (project / ".mcp.json").exists() and not (project / ".claude").exists()  # only what was asked
    assert init(project, "--client", "claude-desktop", "--no-instructions").returncode == 0
    assert len(list(config.parent.glob("*.bak"))) == 1  # unchanged: no new backup


@pytest.mark.anyio
async def test_the_session_start_hook_gives_the_brief_as_the_sessions_context(project, tmp_path):
    data = tmp_path / "data"
    (data / "mcp-harness").mkdir(parents=True)
    db = f"sqlite+aiosqlite:///{data / 'mcp-harness' / 'harness.db'}"
    async with mcp_client(db, "shop-front", agent="claude-code") as c:
        await call(c, "add_tasks", tasks=[{"key": "cart", "title": "Shopping cart"}])
        await call(c, "record_progress", summary="catalogue page done")
    out = init(project)
    assert (
        out.returncode == 0
        and "set the lifecycle hooks (SessionStart, UserPromptSubmit, PreCompact, SessionEnd, StopFailure)"
        in out.stdout
    )
    settings = read(project / ".claude" / "settings.json")
    assert list(settings["hooks"]) == ["SessionStart", "UserPromptSubmit", "PreCompact", "SessionEnd", "StopFailure"]
    [group] = settings["hooks"]["SessionStart"]
    assert group["matcher"] == "startup|resume|clear|compact"
    command = group["hooks"][0]["command"]
    assert command == "mcp-harness hook SessionStart --workspace shop-front --agent claude-code"
    env = subprocess_env(
        PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", XDG_DATA_HOME=str(data), XDG_RUNTIME_DIR=str(tmp_path)
    )
    event = {"session_id": "feed1234-0000", "hook_event_name": "SessionStart", "source": "startup", "cwd": "."}
    shown = subprocess.run(
        command, shell=True, cwd=project, capture_output=True, text=True, env=env, timeout=60, input=json.dumps(event)
    )
    assert shown.returncode == 0 and shown.stderr == "", shown.stderr
    text = json.loads(shown.stdout)["hookSpecificOutput"]["additionalContext"]
    assert text.startswith("mcp-harness: this session is agent claude-code:feed1234 in workspace shop-front")
    assert "catalogue page done" in text and 'cart "Shopping cart"' in text


def test_an_earlier_brief_hook_is_replaced_by_the_pack(project):
    (project / ".claude").mkdir()
    mine = {"type": "command", "command": "./lint.sh"}
    old = {"type": "command", "command": "mcp-harness brief --workspace shop-front --agent claude-code"}
    (project / ".claude" / "settings.json").write_text(
        json.dumps(
            {
                "model": "opus",
                "hooks": {"SessionStart": [{"matcher": "startup", "hooks": [mine, old]}], "Stop": [{"hooks": [mine]}]},
            }
        )
    )
    assert init(project).returncode == 0
    settings = read(project / ".claude" / "settings.json")
    assert settings["model"] == "opus" and settings["hooks"]["Stop"] == [{"hooks": [mine]}]
    start = settings["hooks"]["SessionStart"][0]["hooks"]
    assert (
        start[0] == mine
        and start[1]["command"] == "mcp-harness hook SessionStart --workspace shop-front --agent claude-code"
        and len(start) == 2
    )


def test_remove_takes_out_what_init_added_and_nothing_else(project):
    (project / ".claude").mkdir()
    stop = {"hooks": {"Stop": [{"hooks": [{"type": "command", "command": "./lint.sh"}]}]}}
    (project / ".claude" / "settings.json").write_text(json.dumps(stop, indent=2) + "\n")  # as init writes JSON
    web = {"mcpServers": {"web": {"type": "http", "url": "http://w"}}}
    (project / ".mcp.json").write_text(json.dumps(web, indent=2) + "\n")
    (project / "CLAUDE.md").write_text("# Claude\n\nBe brief.\n")
    before = snapshot(project)
    assert init(project).returncode == 0
    assert "@AGENTS.md" in (project / "CLAUDE.md").read_text() and (project / "AGENTS.md").exists()
    added = snapshot(project)
    shown = init(project, "--remove", "--dry-run")  # says what it would do, as nothing is done yet
    assert shown.returncode == 0 and "would remove 5 mcp-harness hooks" in shown.stdout
    assert ".mcp.json: would remove server 'harness'; would be written as:" in shown.stdout
    assert (
        "AGENTS.md: would remove the mcp-harness section; nothing else would be left in it: would be deleted"
        in shown.stdout
    )
    assert "removed" not in shown.stdout and snapshot(project) == added
    out = init(project, "--remove")
    assert out.returncode == 0, out.stderr
    assert snapshot(project) == before  # exactly as it was
    again = init(project, "--remove")
    assert again.returncode == 0 and snapshot(project) == before and "unchanged" in again.stdout


def test_claude_md_imports_agents_md_once_and_keeps_its_lines(project):
    (project / "CLAUDE.md").write_text("# Claude\n\n- use pnpm\n")
    assert init(project, "--no-hooks").returncode == 0
    assert init(project, "--no-hooks").returncode == 0
    text = (project / "CLAUDE.md").read_text()
    assert text.startswith("# Claude\n\n- use pnpm\n\n") and text.count("\n@AGENTS.md\n") == 1
    assert "<!-- mcp-harness:begin -->" in (project / "AGENTS.md").read_text()
    (project / "CLAUDE.md").unlink()
    assert init(project, "--no-hooks").returncode == 0  # created when missing
    assert (project / "CLAUDE.md").read_text().endswith("@AGENTS.md\n")
    assert init(project, "--client", "cursor", "--no-hooks").returncode == 0


def test_the_instructions_section_is_written_once(project):
    (project / "AGENTS.md").write_text("# Shop front\n\nUse pnpm.\n")
    assert init(project, "--no-hooks").returncode == 0
    assert init(project, "--no-hooks").returncode == 0
    text = (project / "AGENTS.md").read_text()
    assert text.startswith("# Shop front\n\nUse pnpm.\n\n<!-- mcp-harness:begin -->")
    assert text.count("<!-- mcp-harness:begin -->") == 1 and text.count("<!-- mcp-harness:end -->") == 1
    loop = [line for line in text.splitlines() if line[:2] in ("1.", "2.", "3.", "4.", "5.")]
    assert len(loop) == 5 and "restore_state" in loop[0] and "workspace `shop-front`" in text
    (project / "CLAUDE.md").write_text("# Claude\n<!-- mcp-harness:begin -->\nold\n<!-- mcp-harness:end -->\n")
    assert init(project, "--no-hooks").returncode == 0  # an earlier init's section in CLAUDE.md stays there
    assert "@AGENTS.md" not in (project / "CLAUDE.md").read_text()


def test_a_section_an_earlier_release_wrote_is_brought_up_to_date_and_an_edited_one_kept(project):
    from mcp_harness.cli.project import EARLIER_STEP_5, STEP_5

    assert init(project, "--no-hooks").returncode == 0
    current = (project / "AGENTS.md").read_text()
    (project / "AGENTS.md").write_text(current.replace(STEP_5, EARLIER_STEP_5[0]))
    out = init(project, "--no-hooks")
    assert out.returncode == 0 and "updated the mcp-harness section" in out.stdout, out.stdout
    assert (project / "AGENTS.md").read_text() == current
    edited = current.replace(STEP_5, "5. Before you stop: tell me.")
    (project / "AGENTS.md").write_text(edited)
    out = init(project, "--no-hooks")
    assert "differs (edited?): kept" in out.stdout and (project / "AGENTS.md").read_text() == edited, out.stdout


def test_http_entries_reference_the_token_through_an_environment_variable(project):
    out = init(
        project,
        "--transport",
        "http",
        "--url",
        "https://harness.example/mcp",
        "--token-env",
        "TEAM_TOKEN",
        "--workspace",
        "shop-front",
        "--client",
        "claude-code",
        "--client",
        "cursor",
        "--client",
        "vscode",
    )
    assert out.returncode == 0, out.stderr
    assert read(project / ".mcp.json")["mcpServers"]["harness"] == {
        "type": "http",
        "url": "https://harness.example/mcp",
        "headers": {"Authorization": "Bearer ${TEAM_TOKEN}"},
    }
    assert read(project / ".cursor" / "mcp.json")["mcpServers"]["harness"]["headers"] == {
        "Authorization": "Bearer ${env:TEAM_TOKEN}"
    }
    assert read(project / ".vscode" / "mcp.json")["servers"]["harness"]["type"] == "http"
    hook = read(project / ".claude" / "settings.json")["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert hook == "mcp-harness hook SessionStart --url https://harness.example/mcp --token-env TEAM_TOKEN"
    assert "environment variable TEAM_TOKEN" in out.stdout


def test_dry_run_writes_nothing_and_bad_json_stops_everything(project):
    out = init(project, "--dry-run")
    assert out.returncode == 0 and "would be written" in out.stdout and '"mcpServers"' in out.stdout
    assert ".mcp.json: would add server 'harness'" in out.stdout and "added" not in out.stdout
    assert snapshot(project) == {}
    (project / ".claude").mkdir()
    (project / ".claude" / "settings.json").write_text("{not json")
    bad = init(project)
    assert bad.returncode != 0 and len(bad.stderr.strip().splitlines()) == 1 and "settings.json" in bad.stderr
    assert not (project / ".mcp.json").exists()  # nothing was written


def test_the_instructions_section_is_the_same_whatever_the_flags(project):
    """A second run with other clients (or without hooks) finds the section it wrote unchanged."""
    first = init(project)
    assert first.returncode == 0, first.stderr
    for flags in (("--client", "cursor", "--client", "vscode"), ("--no-hooks",), ()):
        again = init(project, *flags)
        assert again.returncode == 0, again.stderr
        assert "edited" not in again.stdout + again.stderr, (flags, again.stdout, again.stderr)
    assert (project / "AGENTS.md").read_text().count("## Working memory: mcp-harness") == 1


def test_outside_git_the_folder_is_the_project_but_never_home_or_root(tmp_path):
    plain = tmp_path / "notes"
    plain.mkdir()
    out = init(plain, "--no-hooks")
    assert out.returncode == 0, out.stderr
    assert "not inside a git repository: the current folder is treated as the project" in out.stdout
    assert (plain / ".mcp.json").exists() and (plain / "AGENTS.md").exists()
    home = tmp_path / "home"  # init() makes project.parent / "home" the HOME
    home.mkdir()
    for folder in (home, Path("/")):
        refused = init(plain, cwd=folder)
        assert refused.returncode == 2 and refused.stdout == "", refused.stdout
        assert len(refused.stderr.strip().splitlines()) == 1 and "nothing was written" in refused.stderr
    assert "home directory" in init(plain, cwd=home).stderr and list(home.iterdir()) == []


@pytest.mark.parametrize(
    ("folder", "expected"), [("Ünïcode app", "Unicode-app"), ("--my.app--", "my.app"), ("日本", None)]
)
def test_the_default_workspace_is_the_folder_name_made_valid(tmp_path, folder, expected):
    root = tmp_path / folder
    root.mkdir()
    out = init(root, "--no-hooks", "--no-instructions")
    if expected is None:
        assert out.returncode == 2 and "--workspace NAME" in out.stderr and not (root / ".mcp.json").exists()
        assert len(out.stderr.strip().splitlines()) == 1
        return
    assert out.returncode == 0, out.stderr
    assert read(root / ".mcp.json")["mcpServers"]["harness"]["args"][2] == expected
    assert f"Workspace {expected!r} (from the project folder's name {folder!r}" in out.stdout


@pytest.mark.parametrize("name", ["", "-x", "a b", "x" * 129])
def test_a_bad_workspace_name_is_refused(project, name):
    out = init(project, f"--workspace={name}")
    assert out.returncode == 2 and out.stderr.count("\n") == 1 and "is not a valid workspace name" in out.stderr
    assert snapshot(project) == {}


def test_db_paths_are_made_absolute_and_passwords_refused(project):
    out = init(project, "--db", "data/h.db", cwd=project / "src")
    assert out.returncode == 0, out.stderr
    absolute = str(project / "src" / "data" / "h.db")
    assert read(project / ".mcp.json")["mcpServers"]["harness"]["args"][:3] == ["serve", "--db", absolute]
    hook = read(project / ".claude" / "settings.json")["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert f"hook SessionStart --db {shlex.quote(absolute)} " in hook
    before = snapshot(project)
    refused = init(project, "--force", "--db", "postgresql://app:hunter2@db.internal/app")
    assert refused.returncode == 2 and refused.stderr.count("\n") == 1 and "PGPASSWORD" in refused.stderr
    assert "hunter2" not in refused.stderr + refused.stdout and snapshot(project) == before
    keeps = init(project, "--no-hooks", "--no-instructions", "--force", "--db", "postgresql://app@db.internal/app")
    assert keeps.returncode == 0 and "--db postgresql://app@db.internal/app" in keeps.stdout


def test_the_hook_brief_creates_no_database(project, tmp_path):
    missing = tmp_path / "nowhere" / "h.db"
    shown = subprocess.run(
        [sys.executable, "-m", "mcp_harness", "brief", "--db", str(missing)],
        capture_output=True,
        text=True,
        env=subprocess_env(),
        timeout=60,
    )
    assert shown.returncode == 0 and "has nothing yet" in shown.stdout
    assert f"no database exists at {missing}" in shown.stdout and not missing.parent.exists()


def test_url_means_http_and_token_env_needs_it(project):
    asked = init(project, "--url", "https://harness.example/mcp", "--no-hooks", "--no-instructions")
    assert asked.returncode == 2 and asked.stderr.count("\n") == 1 and "MCP_HARNESS_TOKEN is not set" in asked.stderr
    assert snapshot(project) == {}  # the token decides the workspace: without it nothing is guessed
    out = init(project, "--url", "https://harness.example/mcp", "--no-hooks", "--no-instructions", "--workspace", "w")
    assert out.returncode == 0, out.stderr
    assert read(project / ".mcp.json")["mcpServers"]["harness"]["headers"] == {
        "Authorization": "Bearer ${MCP_HARNESS_TOKEN}"
    }
    for flags in (
        ("--token-env", "T"),
        ("--transport", "stdio", "--token-env", "T"),
        ("--transport", "stdio", "--url", "https://h/mcp"),
    ):
        refused = init(project, "--force", *flags)
        assert refused.returncode == 2 and refused.stderr.count("\n") == 1, (flags, refused.stderr)
    assert "--transport http" in init(project, "--token-env", "T").stderr


JSONC = """{
  // the team's servers
  "servers": {
    "db": {"type": "stdio", "command": "x",},
  },
}
"""


def test_a_vscode_file_with_comments_is_never_rewritten(project):
    (project / ".vscode").mkdir()
    (project / ".vscode" / "mcp.json").write_text(JSONC)
    found = init(project, "--no-hooks", "--no-instructions")  # vscode found, not asked for: a note
    assert found.returncode == 0, found.stderr
    assert (project / ".vscode" / "mcp.json").read_text() == JSONC and (project / ".mcp.json").exists()
    assert "has comments or trailing commas" in found.stdout and '"harness": {"type": "stdio"' in found.stdout
    asked = init(project, "--client", "vscode", "--client", "cursor", "--no-hooks", "--no-instructions")
    assert asked.returncode == 2 and asked.stderr.count("\n") == 1 and ".vscode/mcp.json" in asked.stderr
    assert (project / ".cursor" / "mcp.json").exists()  # the others are still written
    assert (project / ".vscode" / "mcp.json").read_text() == JSONC
    entry = next(line for line in asked.stdout.splitlines() if line.strip().startswith('"harness":'))
    by_hand = JSONC.replace('"x",},', '"x",},\n    ' + entry.strip() + ",")  # the person adds it
    (project / ".vscode" / "mcp.json").write_text(by_hand)
    done = init(project, "--client", "vscode", "--no-hooks", "--no-instructions")
    assert done.returncode == 0 and "already set up (unchanged)" in done.stdout, done.stdout + done.stderr


def test_claude_desktop_alone_writes_no_instructions(project):
    out = init(project, "--client", "claude-desktop")
    assert out.returncode == 0, out.stderr
    assert snapshot(project) == {}  # Desktop reads no AGENTS.md; its config is the user's


@pytest.mark.anyio
async def test_after_init_commands_in_a_subfolder_use_the_projects_workspace(project, tmp_path):
    db = tmp_path / "team.db"
    async with mcp_client(f"sqlite+aiosqlite:///{db}", "shop-front", agent="claude-code") as c:
        await call(c, "add_tasks", tasks=[{"key": "cart", "title": "Shopping cart"}])
    assert init(project, "--db", str(db), "--no-hooks", "--no-instructions").returncode == 0
    env = subprocess_env(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", XDG_DATA_HOME=str(tmp_path / "xdg"))
    for argv, needle in (
        (["tasks"], "cart"),
        (["tasks", "show", "cart"], "Shopping cart"),
        (["status"], "workspace shop-front"),
    ):
        out = subprocess.run(
            [sys.executable, "-m", "mcp_harness", *argv],
            cwd=project / "src",
            capture_output=True,
            text=True,
            env=env,
            timeout=60,
        )
        assert out.returncode == 0 and needle in out.stdout and out.stderr == "", (argv, out.stdout, out.stderr)
    assert not (tmp_path / "xdg").exists()  # the project's database, not this user's default


def _git(cwd: Path, *args: str) -> None:
    env = subprocess_env(
        GIT_AUTHOR_NAME="t",
        GIT_AUTHOR_EMAIL="t@x",
        GIT_COMMITTER_NAME="t",
        GIT_COMMITTER_EMAIL="t@x",
        GIT_CONFIG_GLOBAL="/dev/null",
    )
    done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True, env=env)
    assert done.returncode == 0, done.stderr


def test_a_linked_worktree_is_its_repositorys_workspace(project, tmp_path):
    """Every worktree of a repository is one workspace (and one database), so their agents coordinate:
    from the main checkout's entry, else the main checkout's folder name, never the worktree's name."""
    (project / "README.md").write_text("x\n")
    _git(project, "add", "README.md")
    _git(project, "commit", "-qm", "start")
    _git(project, "branch", "-M", "main")
    tree = tmp_path / "wt3"
    _git(project, "worktree", "add", "-q", str(tree), "-b", "side")
    plain = init(tree, "--no-hooks", "--no-instructions", "--dry-run")  # the main checkout has no entry yet
    assert plain.returncode == 0, plain.stderr
    assert (
        f"Workspace 'shop-front' (from the folder name 'shop front' of {project}: this folder is a linked "
        "worktree of it" in plain.stdout
    )

    db = str(tmp_path / "team.db")
    assert init(project, "--db", db, "--workspace", "shop", "--no-instructions").returncode == 0
    _git(project, "add", ".mcp.json")
    _git(project, "commit", "-qm", "harness")
    _git(tree, "merge", "-q", "main")  # the worktree's checkout has the same .mcp.json now
    out = init(tree, "--no-instructions")
    assert out.returncode == 0, out.stderr
    assert (
        f"Workspace 'shop' and its database: this folder is a linked worktree of {project}, whose .mcp.json "
        "names it" in out.stdout
    )
    assert ".mcp.json: server 'harness' already set up (unchanged)" in out.stdout and "--force" not in out.stdout
    assert read(tree / ".mcp.json") == read(project / ".mcp.json")
    hooks = read(tree / ".claude" / "settings.json")["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert shlex.split(hooks)[-6:] == ["--db", db, "--workspace", "shop", "--agent", "claude-code"]
    chosen = init(tree, "--workspace", "mine", "--dry-run", "--no-hooks", "--no-instructions")
    assert "Workspace 'mine' (from --workspace)." in chosen.stdout


def test_writing_hooks_are_immune_to_sigterm_from_their_first_instruction(project):
    """The client sends SIGTERM to a hook it stops waiting for (a headless run ending on an API error)
    before Python could ignore it: PreCompact, SessionEnd and StopFailure start as `trap '' TERM; exec`, the
    other hooks as themselves, and the shell the client runs them in really leaves the hook immune."""
    assert init(project).returncode == 0
    hooks = read(project / ".claude" / "settings.json")["hooks"]
    commands = {event: groups[0]["hooks"][0]["command"] for event, groups in hooks.items()}
    for event in ("PreCompact", "SessionEnd", "StopFailure"):
        assert (
            commands[event] == f"trap '' TERM; exec mcp-harness hook {event} --workspace shop-front --agent claude-code"
        )
    assert not commands["SessionStart"].startswith("trap") and not commands["UserPromptSubmit"].startswith("trap")
    probe = commands["StopFailure"].replace("mcp-harness hook StopFailure", "sh -c 'kill -TERM $$; echo alive'", 1)
    survived = subprocess.run(["sh", "-c", probe], capture_output=True, text=True, timeout=30)
    assert survived.stdout.strip() == "alive", survived


def test_an_earlier_writing_hook_is_made_immune_without_force(project):
    assert init(project).returncode == 0
    path = project / ".claude" / "settings.json"
    settings = read(path)
    plain = "mcp-harness hook StopFailure --workspace shop-front --agent claude-code"
    settings["hooks"]["StopFailure"][0]["hooks"][0]["command"] = plain  # as an earlier version wrote it
    path.write_text(json.dumps(settings))
    out = init(project)
    assert out.returncode == 0 and "kept" not in out.stdout, out.stdout
    assert read(path)["hooks"]["StopFailure"][0]["hooks"][0]["command"] == "trap '' TERM; exec " + plain
    assert init(project, "--remove").returncode == 0 and not path.exists()


def test_the_report_ends_with_the_command_that_commits_exactly_what_init_changed(project):
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid"]
    (project / "CLAUDE.md").write_text("# Claude\n")
    subprocess.run([*git, "add", "."], cwd=project, check=True)
    subprocess.run([*git, "commit", "-q", "-m", "first"], cwd=project, check=True)
    first = init(project)
    assert first.returncode == 0, first.stderr
    last = first.stdout.splitlines()[-1]
    files = ".mcp.json .claude/settings.json AGENTS.md CLAUDE.md"
    assert last == f'Commit them: git add {files} && git commit -m "mcp-harness"', first.stdout
    done = subprocess.run(
        last.removeprefix("Commit them: ").replace("git commit", " ".join([*git, "commit"])),
        shell=True,
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    clean = subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True).stdout
    assert clean == "", clean  # the line named every file init wrote
    again = init(project)
    assert again.returncode == 0 and "Commit them" not in again.stdout  # nothing changed: nothing to commit
    assert "Commit them" not in init(project, "--dry-run").stdout
    removed = init(project, "--remove")
    last = removed.stdout.splitlines()[-1]
    assert last == (
        "Commit them: git add CLAUDE.md && git rm -q --cached --ignore-unmatch .mcp.json .claude/settings.json "
        'AGENTS.md && git commit -m "remove mcp-harness"'
    ), removed.stdout
    done = subprocess.run(
        last.removeprefix("Commit them: ").replace("git commit", " ".join([*git, "commit"])),
        shell=True,
        cwd=project,
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    clean = subprocess.run(["git", "status", "--porcelain"], cwd=project, capture_output=True, text=True).stdout
    assert clean == "", clean
