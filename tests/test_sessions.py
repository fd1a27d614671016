"""Session records (mcp_harness/sessions.py): written and trusted only in a folder private to the user,
since a record names the agent a hook acts as."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from mcp_harness import sessions


@pytest.fixture
def runtime(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(tmp_path))
    return tmp_path / "mcp-harness"


def test_a_private_folder_holds_records_that_are_read_back(runtime: Path):
    path = sessions.record("ws", "claude-code:aaaa1111")
    if path is None:
        pytest.skip("no /proc here: sessions are derived, never recorded")
    assert sessions.private(runtime)
    assert sessions.recorded_agent("ws") == "claude-code:aaaa1111"
    sessions.forget(path)
    assert sessions.recorded_agent("ws") is None


def test_our_own_folder_made_open_is_closed_before_a_record_is_written(runtime: Path):
    if sessions.client_of_server() is None:
        pytest.skip("no /proc here: sessions are derived, never recorded")
    runtime.mkdir(mode=0o755)
    runtime.chmod(0o755)  # an older version, or a umask, made it open to others
    assert sessions.record("ws", "claude-code:aaaa1111") is not None
    assert sessions.private(runtime)


def test_a_folder_others_can_write_is_neither_written_nor_trusted(runtime: Path, monkeypatch: pytest.MonkeyPatch):
    if sessions.client_of_server() is None:
        pytest.skip("no /proc here: sessions are derived, never recorded")
    runtime.mkdir(mode=0o755)
    runtime.chmod(0o755)
    mine = sessions.os.getuid
    monkeypatch.setattr(sessions.os, "getuid", lambda: runtime.stat().st_uid + 1)  # someone else's folder
    assert not sessions.private(runtime)
    assert sessions.record("ws", "claude-code:aaaa1111") is None
    # a record planted there (naming another agent) is not believed
    key = sessions.client_of_server()
    assert key is not None
    sessions.record_path(key, "ws").write_text(json.dumps({"workspace": "ws", "agent": "mallory"}))
    for pid in sessions.ancestors():
        if (k := sessions.process_key(pid)) is not None:
            sessions.record_path(k, "ws").write_text(json.dumps({"workspace": "ws", "agent": "mallory"}))
    assert sessions.recorded_agent("ws") is None
    monkeypatch.setattr(sessions.os, "getuid", mine)
    runtime.chmod(0o700)
    assert sessions.recorded_agent("ws") == "mallory"  # the same files, once the folder is ours and private
