"""Commands run inside a project set up with `init` use that project's workspace (and database), unless
--workspace or MCP_HARNESS_WORKSPACE says otherwise; an HTTP entry changes nothing."""

from __future__ import annotations

import json
import re
from pathlib import Path

import anyio
import pytest
from support import call, mcp_client

from mcp_harness.cli.main import main


@pytest.fixture
def seeded(tmp_path: Path) -> Path:
    """A database where workspace `shop` holds a task, a progress entry and a checkpoint."""
    db = tmp_path / "data" / "h.db"
    db.parent.mkdir()

    async def seed() -> None:
        async with mcp_client(f"sqlite+aiosqlite:///{db}", "shop", agent="claude-code") as c:
            await call(c, "add_tasks", tasks=[{"key": "cart", "title": "Shopping cart"}])
            await call(c, "record_progress", summary="catalogue page done")
            await call(c, "save_checkpoint", state={"page": "catalogue"})

    anyio.run(seed)
    return db


def project(root: Path, file: str, key: str, entry: dict) -> Path:
    """A git project (a `.git` folder is enough) whose `file` holds `entry` as its harness server."""
    (root / ".git").mkdir(parents=True)
    (root / "src" / "deep").mkdir(parents=True)
    (root / file).parent.mkdir(parents=True, exist_ok=True)
    (root / file).write_text(json.dumps({key: {"other": {"command": "x"}, "harness": entry}}))
    return root / "src" / "deep"


def stdio(*args: str) -> dict:
    return {"type": "stdio", "command": "mcp-harness", "args": ["serve", *args, "--agent", "claude-code"]}


@pytest.fixture(autouse=True)
def _no_env(monkeypatch, tmp_path):
    monkeypatch.delenv("MCP_HARNESS_WORKSPACE", raising=False)
    monkeypatch.delenv("MCP_HARNESS_DB", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))  # this user's default database


@pytest.mark.parametrize(
    ("file", "key"), [(".mcp.json", "mcpServers"), (".cursor/mcp.json", "mcpServers"), (".vscode/mcp.json", "servers")]
)
def test_read_commands_in_a_subfolder_use_the_projects_workspace_and_db(
    file, key, seeded, tmp_path, monkeypatch, capsys
):
    monkeypatch.chdir(project(tmp_path / "shop", file, key, stdio("--db", str(seeded), "--workspace", "shop")))
    assert main(["tasks", "--json"]) == 0
    out = capsys.readouterr()
    assert [t["key"] for t in json.loads(out.out)["tasks"]] == ["cart"] and out.err == ""  # nothing extra said
    assert main(["log"]) == 0 and "catalogue page done" in capsys.readouterr().out
    assert main(["show", "main"]) == 0 and json.loads(capsys.readouterr().out) == {"page": "catalogue"}
    assert main(["tasks", "show", "cart"]) == 0 and "Shopping cart" in capsys.readouterr().out
    assert main(["brief"]) == 0 and "workspace shop" in capsys.readouterr().out
    assert main(["export"]) == 0
    exported = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert exported and {r.get("workspace") for r in exported if "workspace" in r} == {"shop"}


def test_flags_and_environment_win_over_the_project(seeded, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(
        project(tmp_path / "shop", ".mcp.json", "mcpServers", stdio("--db", str(seeded), "--workspace", "shop"))
    )
    assert main(["tasks", "--json", "--workspace", "other", "--db", str(seeded)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["tasks"] == [] and "this database holds: shop" in out.err
    monkeypatch.setenv("MCP_HARNESS_WORKSPACE", "other")
    assert main(["brief"]) == 0  # no lookup at all: the user's default database
    assert "workspace other has nothing yet" in capsys.readouterr().out
    assert (tmp_path / "xdg" / "mcp-harness" / "harness.db").exists()
    monkeypatch.delenv("MCP_HARNESS_WORKSPACE")
    assert main(["status", "--db", str(tmp_path / "missing.db")]) == 2  # --db given: the entry's is not used
    assert "no database at" in capsys.readouterr().err


def test_a_relative_db_in_the_entry_is_the_projects_and_config_prints_the_same(seeded, tmp_path, monkeypatch, capsys):
    root = tmp_path / "shop"
    sub = project(root, ".mcp.json", "mcpServers", stdio("--db", "../data/h.db", "--workspace", "shop"))
    monkeypatch.chdir(sub)
    assert main(["tasks", "--json"]) == 0 and json.loads(capsys.readouterr().out)["tasks"][0]["key"] == "cart"
    assert main(["config", "claude-code"]) == 0
    snippet = capsys.readouterr().out
    assert f"--db {seeded} --workspace shop" in snippet, snippet


def test_an_http_entry_or_no_project_keeps_the_default_workspace(seeded, tmp_path, monkeypatch, capsys):
    http = {"type": "http", "url": "http://127.0.0.1:8765/mcp", "headers": {"Authorization": "Bearer ${T}"}}
    monkeypatch.chdir(project(tmp_path / "shop", ".mcp.json", "mcpServers", http))
    assert main(["tasks", "--json", "--db", str(seeded)]) == 0
    out = capsys.readouterr()
    assert json.loads(out.out)["tasks"] == [] and "workspace 'default' has no data" in out.err
    monkeypatch.chdir(tmp_path)  # no project at all
    assert main(["config", "cursor"]) == 0 and '"default"' in capsys.readouterr().out


def test_the_first_entry_found_decides_and_a_broken_file_is_passed_over(seeded, tmp_path, monkeypatch, capsys):
    sub = project(tmp_path / "shop", ".vscode/mcp.json", "servers", stdio("--db", str(seeded), "--workspace", "shop"))
    (tmp_path / "shop" / ".mcp.json").write_text("{broken")
    (tmp_path / "shop" / ".vscode" / "mcp.json").write_text(
        '{\n  // VS Code allows comments\n  "servers": {"harness": '
        + json.dumps(stdio("--db", str(seeded), "--workspace=shop"))
        + ",},\n}"
    )
    monkeypatch.chdir(sub)
    assert main(["tasks", "--json"]) == 0 and json.loads(capsys.readouterr().out)["tasks"][0]["key"] == "cart"


def test_tasks_show_names_the_other_workspaces_once(seeded, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["tasks", "show", "cart", "--db", str(seeded)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.count("has no data") == 1 and "this database holds: shop" in err, err


@pytest.mark.slow  # runs git
def test_a_linked_worktree_without_an_entry_uses_its_repositorys(seeded, tmp_path, monkeypatch, capsys):
    """A person's commands in a linked worktree nobody ran `init` in (the project files not committed)
    read the repository's workspace and database, from the main working tree's entry (a relative --db
    there is the main tree's file); a worktree's own entry, when there is one, comes first."""
    import shutil
    import subprocess

    repo = tmp_path / "shop"
    repo.mkdir()
    shutil.copy(seeded, repo / "h.db")

    def git(*args: str, cwd: Path = repo) -> None:
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=cwd, check=True, capture_output=True
        )

    git("init", "-q")
    (repo / "README").write_text("shop\n")
    git("add", "README")
    git("commit", "-qm", "start")
    (repo / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"harness": stdio("--db", "h.db", "--workspace", "shop")}})
    )
    git("worktree", "add", "-q", str(tmp_path / "wt2"))
    (tmp_path / "wt2" / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "wt2" / "sub")
    assert main(["tasks", "--json"]) == 0
    assert [t["key"] for t in json.loads(capsys.readouterr().out)["tasks"]] == ["cart"]
    # the worktree's own entry wins (here: another workspace, which holds nothing)
    (tmp_path / "wt2" / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"harness": stdio("--db", str(repo / "h.db"), "--workspace", "other")}})
    )
    assert main(["tasks", "--json"]) == 0 and json.loads(capsys.readouterr().out)["tasks"] == []
    # a folder outside any repository keeps the defaults
    monkeypatch.chdir(tmp_path)
    assert main(["tasks", "--json"]) == 0 and json.loads(capsys.readouterr().out)["tasks"] == []


def test_log_refuses_what_it_cannot_read_and_says_which_filter_found_nothing(seeded, capsys):
    """A fresh-eyes trial got tracebacks from `log` (a --limit past what a database stores, a task or
    thread that is not UTF-8) and "no progress recorded yet" beside entries that exist: each bad value is
    one line naming what is allowed (exit 2), and an empty filter says which filter found nothing."""
    db = ["--db", str(seeded), "--workspace", "shop"]
    for bad, said in (
        (["--limit", "99999999999999999999"], "use a whole number from 1 to 9007199254740991"),
        (["--task", "\udcff"], "the argument '\\xff' is not valid UTF-8"),
        (["--thread", "a\udcfeb"], "the argument 'a\\xfeb' is not valid UTF-8"),
        (["--task", "bad name!"], "task 'bad name!' is not a valid name"),
    ):
        try:
            status = main(["log", *db, *bad])
        except SystemExit as exc:  # argparse's refusal of a --limit
            status = exc.code
        err = capsys.readouterr().err
        assert status == 2, (bad, status)
        assert said in err and "Traceback" not in err and err.count("\n") == 1, err
    assert main(["log", *db, "--task", "nope"]) == 0
    assert capsys.readouterr().out == "no progress entry matches task 'nope'\n"
    assert main(["log", *db, "--query", "zzzz"]) == 0
    assert capsys.readouterr().out == "no progress entry matches query 'zzzz'\n"
    assert main(["log", *db, "--query", "catalogue", "--task", "cart"]) == 2  # a search reads the whole log
    assert "does not combine with --task or --thread" in capsys.readouterr().err
    assert main(["log", *db]) == 0 and "catalogue page done" in capsys.readouterr().out


def test_tasks_show_says_how_long_ago_a_lease_ran_out(seeded, capsys):
    from mcp_harness import clock
    from mcp_harness.arguments import ClaimTaskArgs
    from mcp_harness.config import Settings
    from mcp_harness.service import Harness, Identity

    async def claim() -> None:
        async with Harness.open(Settings.from_env(str(seeded))) as h:
            await h.tasks.claim(Identity("shop", "coder"), ClaimTaskArgs(task_key="cart", lease_seconds=30))

    anyio.run(claim)
    assert main(["tasks", "show", "cart", "--db", str(seeded), "--workspace", "shop"]) == 0
    shown = capsys.readouterr().out
    # the seconds are the wall clock's: a busy machine may take a few between the claim and each look
    left = re.search(r"lease: attempt 1, (\d+)s left", shown)
    assert left is not None and 20 <= int(left[1]) <= 30, shown
    clock.advance(36)
    assert main(["tasks", "show", "cart", "--db", str(seeded), "--workspace", "shop"]) == 0
    out = capsys.readouterr().out
    ago = re.search(r"lease: attempt 1, expired (\d+)s ago", out)
    assert ago is not None and 5 <= int(ago[1]) <= 16, out


def test_a_lease_its_connection_ended_reads_ended_in_every_view(seeded, capsys):
    """A connection's end sets its leases' expiry to that moment; `status` lists such a lease as ENDED, and
    the board and `tasks show` say `ended`, not `expired`, with the reason where there is room."""
    from mcp_harness import clock
    from mcp_harness.arguments import ClaimTaskArgs
    from mcp_harness.config import Settings
    from mcp_harness.service import Harness, Identity

    async def claim_then_end() -> None:
        async with Harness.open(Settings.from_env(str(seeded))) as h:
            coder = Identity("shop", "coder")
            await h.tasks.claim(coder, ClaimTaskArgs(task_key="cart", lease_seconds=600))
            await h.tasks.end_leases(coder, "its connection ended (stdin closed)")

    anyio.run(claim_then_end)
    clock.advance(16)
    where = ["--db", str(seeded), "--workspace", "shop"]
    assert main(["tasks", "show", "cart", *where]) == 0
    shown = capsys.readouterr().out
    said = re.search(r"lease: attempt 1, ended (\d+)s ago \(its connection ended \(stdin closed\); the next", shown)
    assert said and 15 <= int(said[1]) <= 30, shown  # the clock moved 16 s on; a busy machine adds some
    assert "expired" not in shown, shown
    assert main(["tasks", *where]) == 0
    board = capsys.readouterr().out
    assert "ended" in board.split("cart", 1)[1].splitlines()[0] and "expired" not in board, board
    assert main(["status", *where]) == 0
    assert "ENDED" in capsys.readouterr().out
