"""Bad command-line words: one line on stderr naming the command and what was wrong, exit 2."""

from __future__ import annotations

import pytest

from mcp_harness.cli.main import main


@pytest.mark.parametrize(
    ("argv", "needle"),
    [
        (["serve", "--transport", "http", "--port", "99999"], "'99999' is not a port"),
        (["ui", "--port", "70000"], "'70000' is not a port"),
        (["serve", "--port", "x"], "'x' is not a port"),
        (["tasks", "--status", "nope"], "invalid choice: 'nope'"),
        (["bogus"], "invalid choice: 'bogus'"),
        (["log", "--limit", "abc"], "invalid int value"),
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
