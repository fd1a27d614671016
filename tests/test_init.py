"""`mcp-harness init` in temporary projects (a fake HOME for Claude Desktop): each client's file
written and merged, idempotence, --force, the hook's command really printing the brief, the
instructions section written once."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import call, mcp_client, subprocess_env

pytestmark = pytest.mark.slow  # every test runs `mcp-harness init` in a process

BIN = str(Path(sys.executable).parent)  # this install's mcp-harness is on the PATH init sees


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "shop front"
    (root / "src").mkdir(parents=True)
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    return root


def init(project: Path, *args: str, cwd: Path | None = None, **env: str) -> subprocess.CompletedProcess:
    environment = subprocess_env(HOME=str(project.parent / "home"), PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}",
                                 **env)  # fmt: skip
    environment.pop("XDG_CONFIG_HOME", None)
    return subprocess.run([sys.executable, "-m", "mcp_harness", "init", *args], cwd=cwd or project,
                          capture_output=True, text=True, env=environment, timeout=60)  # fmt: skip


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
    (project / ".vscode" / "mcp.json").write_text(json.dumps({"servers": {"db": {"type": "stdio", "command": "x"}},
                                                               "inputs": []}))  # fmt: skip
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"web": {"type": "http", "url": "http://w"}}}))
    first = init(project, cwd=project / "src")  # from a subfolder: the git top level is the project
    assert first.returncode == 0, first.stderr
    code = read(project / ".mcp.json")["mcpServers"]
    assert code["web"] == {"type": "http", "url": "http://w"}  # other servers stay
    assert code["harness"] == {"type": "stdio", "command": "mcp-harness",  # by name: it is on PATH
                               "args": ["serve", "--workspace", "shop-front", "--agent", "claude-code"]}  # fmt: skip
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
    assert again.stdout.count("unchanged") == 5  # three servers, the hook, the instructions


def test_an_existing_different_entry_is_kept_unless_force(project):
    mine = {"mcpServers": {"harness": {"command": "/opt/old/mcp-harness", "args": ["serve"]}}}
    (project / ".mcp.json").write_text(json.dumps(mine))
    kept = init(project, "--no-hooks", "--no-instructions")
    assert kept.returncode == 0 and "exists with other settings: kept (--force replaces it)" in kept.stdout
    assert read(project / ".mcp.json") == mine
    forced = init(project, "--no-hooks", "--no-instructions", "--force", "--workspace", "shop")
    assert forced.returncode == 0 and "replaced server 'harness'" in forced.stdout
    assert read(project / ".mcp.json")["mcpServers"]["harness"]["args"] == [
        "serve", "--workspace", "shop", "--agent", "claude-code"]  # fmt: skip
    assert not (project / ".claude").exists() and not (project / "AGENTS.md").exists()


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
async def test_the_hook_command_prints_the_brief(project, tmp_path):
    data = tmp_path / "data"
    (data / "mcp-harness").mkdir(parents=True)
    db = f"sqlite+aiosqlite:///{data / 'mcp-harness' / 'harness.db'}"
    async with mcp_client(db, "shop-front", agent="claude-code") as c:
        await call(c, "add_tasks", tasks=[{"key": "cart", "title": "Shopping cart"}])
        await call(c, "record_progress", summary="catalogue page done")
    out = init(project)
    assert out.returncode == 0 and "SessionStart hook, which runs: mcp-harness brief" in out.stdout
    settings = read(project / ".claude" / "settings.json")
    [group] = settings["hooks"]["SessionStart"]
    assert group["matcher"] == "startup|resume|clear|compact"
    command = group["hooks"][0]["command"]
    assert command == "mcp-harness brief --workspace shop-front --agent claude-code"
    env = subprocess_env(PATH=f"{BIN}{os.pathsep}{os.environ['PATH']}", XDG_DATA_HOME=str(data))
    shown = subprocess.run(command, shell=True, cwd=project, capture_output=True, text=True, env=env, timeout=60)
    assert shown.returncode == 0, shown.stderr
    assert "workspace shop-front" in shown.stdout and "catalogue page done" in shown.stdout
    assert 'cart "Shopping cart"' in shown.stdout


def test_the_instructions_section_is_written_once(project):
    (project / "AGENTS.md").write_text("# Shop front\n\nUse pnpm.\n")
    assert init(project, "--no-hooks").returncode == 0
    assert init(project, "--no-hooks").returncode == 0
    text = (project / "AGENTS.md").read_text()
    assert text.startswith("# Shop front\n\nUse pnpm.\n\n<!-- mcp-harness:begin -->")
    assert text.count("<!-- mcp-harness:begin -->") == 1 and text.count("<!-- mcp-harness:end -->") == 1
    loop = [line for line in text.splitlines() if line[:2] in ("1.", "2.", "3.", "4.", "5.")]
    assert len(loop) == 5 and "restore_state" in loop[0] and "workspace `shop-front`" in text
    (project / "CLAUDE.md").write_text("# Claude\n")
    assert init(project, "--no-hooks").returncode == 0  # CLAUDE.md, when there is one, gets it instead
    assert "<!-- mcp-harness:begin -->" in (project / "CLAUDE.md").read_text()


def test_http_entries_reference_the_token_through_an_environment_variable(project):
    out = init(project, "--transport", "http", "--url", "https://harness.example/mcp", "--token-env", "TEAM_TOKEN",
               "--client", "claude-code", "--client", "cursor", "--client", "vscode")  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert read(project / ".mcp.json")["mcpServers"]["harness"] == {
        "type": "http", "url": "https://harness.example/mcp",
        "headers": {"Authorization": "Bearer ${TEAM_TOKEN}"}}  # fmt: skip
    assert read(project / ".cursor" / "mcp.json")["mcpServers"]["harness"]["headers"] == {
        "Authorization": "Bearer ${env:TEAM_TOKEN}"}  # fmt: skip
    assert read(project / ".vscode" / "mcp.json")["servers"]["harness"]["type"] == "http"
    hook = read(project / ".claude" / "settings.json")["hooks"]["SessionStart"][0]["hooks"][0]["command"]
    assert hook == "mcp-harness brief --url https://harness.example/mcp --token-env TEAM_TOKEN"
    assert "environment variable TEAM_TOKEN" in out.stdout


def test_dry_run_writes_nothing_and_bad_json_stops_everything(project):
    out = init(project, "--dry-run")
    assert out.returncode == 0 and "would be written" in out.stdout and '"mcpServers"' in out.stdout
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
