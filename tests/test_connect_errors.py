"""Connecting fails in one line for every command, never a traceback: a PostgreSQL database that does
not exist, a user the server refuses (the password is never printed), `--db` naming a folder."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from support import PG_ENV, subprocess_env

from mcp_harness.cli.main import main

SECRET = "s3cret-i19-pw"


def server_url() -> str:
    """postgresql+asyncpg://USER@HOST:PORT of the test server, without a database."""
    url = os.environ.get(PG_ENV)
    if not url:
        pytest.skip(f"PostgreSQL tests need {PG_ENV}")
    return url.rsplit("/", 1)[0]


def no_such_db() -> str:
    return server_url() + "/mcp_harness_no_such_db_i19"


def stranger() -> str:
    """The test server's address with a user that does not exist, and a password."""
    rest = server_url().split("://", 1)[1].split("@", 1)[-1]
    return f"postgresql+asyncpg://nobody_i19:{SECRET}@{rest}/postgres"


COMMANDS = [
    ["status"],
    ["tasks"],
    ["tasks", "show", "k"],
    ["log"],
    ["history", "main"],
    ["show", "main"],
    ["brief"],
    ["export"],
    ["prune", "--keep-last", "1"],
    ["schema", "set", "--thread", "t", "s.json"],
]


@pytest.mark.parametrize("argv", COMMANDS, ids=lambda a: " ".join(a[:2]))
def test_a_database_that_does_not_exist_is_one_line(argv, capsys, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "s.json").write_text("{}")
    assert main([*argv, "--db", no_such_db()]) == 2
    err = capsys.readouterr().err
    host = server_url().split("@")[-1]
    assert err == (
        f"mcp-harness: database 'mcp_harness_no_such_db_i19' does not exist on {host}: create it "
        "(createdb mcp_harness_no_such_db_i19) or fix --db\n"
    )


@pytest.mark.parametrize("argv", COMMANDS[:3], ids=lambda a: " ".join(a[:2]))
def test_a_refused_user_is_one_line_without_the_password(argv, capsys):
    assert main([*argv, "--db", stranger()]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "refused to sign in user 'nobody_i19'" in err and "PGPASSWORD" in err, err
    assert SECRET not in err


def test_a_folder_as_db_is_one_line(capsys, tmp_path):
    for db in (str(tmp_path), f"sqlite+aiosqlite:///{tmp_path}", f"sqlite:///{tmp_path}"):
        assert main(["status", "--db", db]) == 2
        err = capsys.readouterr().err
        assert (
            err == f"mcp-harness: the database {tmp_path} is a directory: give a file path "
            f"(e.g. {tmp_path / 'harness.db'})\n"
        ), err


@pytest.mark.slow
@pytest.mark.parametrize("transport", ["stdio", "http"])
def test_serve_says_it_in_one_line(transport):
    for url, needle in ((no_such_db(), "does not exist on"), (stranger(), "refused to sign in")):
        args = ["serve", "--db", url, "--workspace", "w"] + (
            ["--transport", "http", "--port", "0"] if transport == "http" else []
        )
        out = subprocess.run(
            [sys.executable, "-m", "mcp_harness", *args],
            capture_output=True,
            text=True,
            env=subprocess_env(),
            stdin=subprocess.DEVNULL,
            timeout=60,
        )
        lines = out.stderr.strip().splitlines()
        assert len(lines) == 1 and needle in lines[0] and "Traceback" not in out.stderr, out.stderr
        assert SECRET not in out.stderr + out.stdout
        if transport == "http":
            assert out.returncode == 2


@pytest.mark.parametrize("port", ["notaport", "99999"])
def test_a_postgresql_url_with_a_bad_port_is_one_line_without_the_password(port, capsys):
    assert main(["status", "--db", f"postgresql://app:{SECRET}@127.0.0.1:{port}/db"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "port that is not a number" in err and SECRET not in err, err
