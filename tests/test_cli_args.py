"""Bad command-line words: one line on stderr naming the command and what was wrong, exit 2."""

from __future__ import annotations

import anyio
import pytest
from support import call, mcp_client

from mcp_harness.cli.main import main


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["serve", "--transport", "http", "--port", "99999"], "'99999' is not a port"),
        (["ui", "--port", "70000"], "'70000' is not a port"),
        (["serve", "--port", "x"], "'x' is not a port"),
        (["tasks", "--status", "nope"], "invalid choice: 'nope'"),
        (["bogus"], "invalid choice: 'bogus'"),
        (["log", "--limit", "abc"], "'abc' is not a count"),
    ],
)
def test_bad_words_are_one_line_and_exit_2(argv, needle, capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        main([*argv, "--db", str(tmp_path / "h.db")] if argv[0] != "bogus" else argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err and "Traceback" not in err, err
    assert err.startswith("mcp-harness"), err
    assert not (tmp_path / "h.db").exists()  # refused before anything was opened


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["log", "--limit", "0"], "'0' is not a count"),
        (["history", "main", "--limit", "-3"], "'-3' is not a count"),
        (["config", "claude-code", "--transport", "http", "--url", "notaurl"], "'notaurl' is not a server URL"),
        (["init", "--transport", "http", "--url", "ftp://x/mcp"], "'ftp://x/mcp' is not a server URL"),
        (["brief", "--url", "http://:99/mcp"], "is not a server URL"),
    ],
)
def test_counts_and_urls_are_checked(argv, needle, capsys, tmp_path):
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and needle in err, err


@pytest.mark.parametrize(
    ("words", "own", "not_its"),
    [
        (["tasks", "show"], "KEY", "--status"),
        (["tasks", "add"], "--title", "--status"),
        (["tasks", "release"], "--reason", "--title"),
        (["tasks", "retry"], "KEY", "--reason"),
        (["tasks", "cancel"], "--reason", "--title"),
        (["tasks", "reopen"], "--reason", "--title"),
        (["review", "list"], "--json", "--comment"),
        (["review", "approve"], "--comment", "list"),
        (["review", "reject"], "--comment", "list"),
        (["sessions", "show"], "ID", "--live"),
        (["sessions", "stop"], "--agent", "--live"),
        (["msg", "send"], "--to", "--all"),
        (["token", "create"], "--role", "revoke"),
    ],
)
def test_each_word_of_a_command_has_its_own_help(words, own, not_its, capsys):
    """`tasks add --help` is the help of `tasks add` (its usage and flags), not the whole `tasks` command's."""
    with pytest.raises(SystemExit) as exited:
        main([*words, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: mcp-harness {' '.join(words)} "), out
    assert own in out and not_its not in out, out


@pytest.mark.parametrize(
    "argv",
    [["status"], ["log"], ["tasks"], ["tasks", "show", "k"], ["history", "main"], ["show", "main"], ["export"]],
)
def test_a_mistyped_db_is_refused_not_created(argv, capsys, tmp_path):
    """A read command on a SQLite file that is not there says so (exit 2) and creates nothing: an empty
    database made from a typo looks like lost data."""
    missing = tmp_path / "typo" / "harnes.db"
    assert main([*argv, "--db", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no database at {missing}" in err, err
    assert not missing.exists() and not missing.parent.exists()
    assert main([*argv, "--db", f"sqlite+aiosqlite:///{missing}"]) == 2
    assert not missing.parent.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["token", "list"],
        ["token", "revoke", "tk_x"],
        ["review", "list"],
        ["review", "approve", "k"],
        ["tasks", "release", "k", "--reason", "away"],
        ["tasks", "retry", "k"],
    ],
)
def test_commands_that_act_on_what_is_there_refuse_a_missing_db(argv, capsys, tmp_path):
    """Listing or revoking tokens, a review or a person's action on a task: a database that is not there
    holds nothing to act on, so a mistyped --db is refused as for the read commands."""
    missing = tmp_path / "harnes.db"
    assert main([*argv, "--db", str(missing)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"no database at {missing}" in err, err
    assert not missing.exists()


@pytest.mark.parametrize(
    "argv",
    [
        ["token", "create", "--workspace", "w", "--agent", "a"],
        ["tasks", "add", "k", "--title", "t"],
        ["schema", "set", "--thread", "main", "SCHEMA"],
        ["import", "EXPORT"],
        ["run", "--dry-run", "--command", "true"],
        ["ui", "--port", "0"],
    ],
)
def test_a_db_path_whose_folder_is_missing_is_refused_not_created(argv, capsys, tmp_path):
    """Commands that may make the database on first use (a token before the server's first start) still
    refuse a path whose folder is not there: a typo, said so, and nothing created."""
    (tmp_path / "schema.json").write_text("{}")
    (tmp_path / "export.jsonl").write_text("")
    argv = [{"SCHEMA": str(tmp_path / "schema.json"), "EXPORT": str(tmp_path / "export.jsonl")}.get(w, w) for w in argv]
    missing = tmp_path / "nonexistent" / "x.db"
    for db in (str(missing), f"sqlite+aiosqlite:///{missing}"):
        assert main([*argv, "--db", db]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and f"no folder {missing.parent} for the database" in err, err
        assert "nothing was created" in err and not missing.parent.exists()


def test_a_token_may_make_the_database_in_a_folder_that_is_there(capsys, tmp_path):
    db = tmp_path / "h.db"
    assert main(["token", "create", "--workspace", "w", "--agent", "a", "--db", str(db)]) == 0
    assert db.exists() and capsys.readouterr().out.strip().splitlines()[-1]


def test_config_prints_a_db_path_without_making_its_folder(capsys, tmp_path):
    missing = tmp_path / "later" / "x.db"
    assert main(["config", "claude-code", "--db", str(missing)]) == 0
    assert str(missing) in capsys.readouterr().out and not missing.parent.exists()  # the server makes it


def test_export_of_an_unknown_workspace_and_import_of_a_missing_file(capsys, tmp_path):
    db = str(tmp_path / "h.db")

    async def seed() -> None:
        async with mcp_client(f"sqlite+aiosqlite:///{db}", "alpha") as client:
            await call(client, "record_progress", summary="started")

    anyio.run(seed)
    assert main(["export", "--workspace", "nosuch", "--db", db]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "workspace 'nosuch' has no data to export; this database holds: alpha" in captured.err, captured.err
    assert main(["import", str(tmp_path / "missing.jsonl"), "--db", db]) == 2
    assert "cannot read" in capsys.readouterr().err
